"""The audit's own check of slot dependencies (`schedules/audit/dependencies.py`), on
histories written as data: `dependency_unmet` when a slot's work started before the
upstream slots mapped onto it had completed, with its witnesses; a run anyway its policy
allowed, and upstream slots from before the upstream's timing took effect, are not."""

from __future__ import annotations

from collections import namedtuple
from datetime import timedelta

from schedules.audit.dependencies import Downstream, Facts, Upstream, findings
from schedules.audit.oracle import Timing
from schedules.catalog.dependencies import DependencySpec
from tests.dependency_windows import WINDOWS, H, hours

Row = namedtuple("Row", "id scheduled_at status origin attempt workflow_id run_id")
_, SLOT, PREVIOUS = WINDOWS["new york, fall back"]  # 25 hourly slots
MAPPED = hours(PREVIOUS + H, SLOT)
UP = Upstream("hourly", Timing("0 * * * *", None, "UTC"), floor=None)


def judged(on_failure="wait", started=SLOT + 2 * H, done_at=None, wait=None, floor=None):
    """One night worked at `started`, its upstream's 25 slots done at `done_at` (each a
    minute after its slot by default)."""
    dep = DependencySpec(job="hourly", slots="window", within="2h", on_failure=on_failure)
    night = Row(7, SLOT, "completed", "backfill", 1, "w", "r")
    down = Downstream("night", Timing("0 2 * * *", None, "America/New_York"), [dep], {SLOT: night})
    rows = {
        s: ("completed", (done_at or {}).get(s, s + timedelta(minutes=1)), i)
        for i, s in enumerate(MAPPED)
    }
    facts = Facts(
        work_started={7: started}, waits={7: wait} if wait else {}, upstream_rows={"hourly": rows}
    )
    upstream = Upstream(UP.ledger, UP.timing, floor)
    return findings([down], {"hourly": upstream}, facts)


def test_work_after_every_mapped_slot_completed_is_clean():
    assert judged() == []


def test_work_before_the_last_slot_completed_is_a_finding_with_witnesses():
    (found,) = judged(done_at={SLOT: SLOT + 3 * H})
    assert (found.kind, found.job, found.slot) == ("dependency_unmet", "night", SLOT)
    assert "before 1 slot(s) of its upstream hourly" in found.detail
    assert found.witnesses["execution_id"] == 7 and found.witnesses["upstream"] == "hourly"
    assert found.witnesses["unmet"][0]["slot"] == "2026-11-01T07:00:00Z"


def test_a_slot_outside_the_window_is_not_waited_for():
    assert judged(done_at={PREVIOUS: SLOT + 3 * H}) == []  # P itself: the night before's


def test_a_run_anyway_is_excused_only_by_its_policy_after_its_deadline():
    late = {SLOT: SLOT + 5 * H}
    wait = {"status": "run_anyway", "began_at": SLOT, "reason": "run anyway"}
    assert judged("run", started=SLOT + 2 * H, done_at=late, wait=wait) == []  # at 2h
    assert len(judged("run", started=SLOT + H, done_at=late, wait=wait)) == 1  # before it
    assert len(judged("wait", started=SLOT + 2 * H, done_at=late, wait=wait)) == 1


def test_slots_before_the_upstream_timing_took_effect_are_not_expected():
    early = {s: SLOT + 3 * H for s in MAPPED[:10]}
    assert len(judged(done_at=early)) == 1
    assert judged(done_at=early, floor=MAPPED[10]) == []


def test_a_run_anyway_after_a_failure_is_excused_though_the_slot_was_run_again_since():
    rerun = {SLOT: SLOT + 5 * H}  # failed when the night decided, completed later
    wait = {"status": "run_anyway", "began_at": SLOT, "failed": frozenset({SLOT})}
    assert judged("run", started=SLOT + H, done_at=rerun, wait=wait) == []
    unrecorded = wait | {"failed": frozenset()}
    assert len(judged("run", started=SLOT + H, done_at=rerun, wait=unrecorded)) == 1
