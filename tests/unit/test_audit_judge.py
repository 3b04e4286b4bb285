"""The audit's judgement on histories given as data: pauses, Temporal's agreement, the
slots a backfill asked for.

The integration mutation suite (tests/integration/test_audit.py) produces each anomaly on
real servers; these cover the rules' edges in milliseconds.
"""

from __future__ import annotations

from collections import namedtuple
from datetime import UTC, datetime, timedelta

from schedules.audit.checks import judge
from schedules.audit.history import Ledger, Run, Visibility, Window
from schedules.audit.runtime import PAUSE_GRACE, Stop
from schedules.catalog.model import parse_catalog
from schedules.health.check import ScheduleState

Row = namedtuple(
    "Row",
    "id job_name scheduled_at status attempt origin workflow_id run_id started_at "
    "finished_at error",
)
DAY = datetime(2026, 6, 10, tzinfo=UTC)
HOURS = [DAY + timedelta(hours=h) for h in range(6)]
JOB = parse_catalog(
    {"hourly": {"kind": "invoice-reminders", "cron": "0 * * * *", "timezone": "UTC"}}
)[0]
WINDOW = Window(
    DAY,
    DAY + timedelta(hours=6),
    DAY + timedelta(days=1),
    timedelta(0),
    *[timedelta(minutes=5)] * 2,
)
RUNNING = ScheduleState(True, True, False, timing_since=DAY)
PAUSED = ScheduleState(True, True, True, timing_since=DAY)


def wid(slot: datetime) -> str:
    return f"hourly-{slot:%Y-%m-%dT%H:%M:%SZ}"


def row(slot: datetime, status: str = "completed", origin: str = "scheduled", i: int = 0):
    return Row(
        i or int(slot.hour) + 1,
        "hourly",
        slot,
        status,
        1,
        origin,
        wid(slot),
        f"run-{slot.hour}",
        slot,
        slot,
        None,
    )


def ledger(rows, pauses=()) -> Ledger:
    by_slot = {r.scheduled_at: r for r in rows}
    bounds = {"hourly": (min(by_slot), max(by_slot))} if by_slot else {}
    return Ledger({"hourly": by_slot}, bounds, [], [], [], [], [], {"hourly": list(pauses)})


def found(rows, state=RUNNING, pauses=(), runs=None):
    visibility = Visibility(runs={"hourly": runs or []})
    findings, _ = judge([JOB], ledger(rows, pauses), visibility, {"hourly": state}, WINDOW)
    return [(f.kind, f.slot) for f in findings]


def test_a_recorded_pause_excuses_its_fire_times_and_nothing_else():
    rows = [row(h) for h in HOURS if h.hour not in (2, 3)]
    assert found(rows) == [("lost", HOURS[2]), ("lost", HOURS[3])]
    pause = (HOURS[2] - timedelta(minutes=1), HOURS[3] + timedelta(minutes=1))
    assert found(rows, pauses=[pause]) == []
    narrow = (HOURS[2], HOURS[3])  # resumed at 03:00: that fire time was due again
    assert found(rows, pauses=[narrow]) == [("lost", HOURS[3])]


def test_paused_now_without_a_record_is_one_inconclusive_finding_and_with_one_is_judged():
    rows = [row(h) for h in HOURS[:2]]
    assert found(rows, state=PAUSED) == [("inconclusive", HOURS[2])]
    assert found(rows, state=PAUSED, pauses=[(HOURS[2], None)]) == []
    # The open pause excuses only what came after it.
    assert found(rows[:1], state=PAUSED, pauses=[(HOURS[2], None)]) == [("lost", HOURS[1])]


def test_an_open_pause_on_a_running_schedule_holds_until_its_first_scheduled_row():
    # Resumed in the UI before 04:00: 04:00 and 05:00 ran; 02:00 and 03:00 are excused,
    # a lost 05:00 is not.
    rows = [row(h) for h in HOURS if h.hour in (0, 1, 4)]
    assert found(rows, pauses=[(HOURS[2], None)]) == [("lost", HOURS[5])]
    # A backfill row proves nothing about the schedule running again.
    backfilled = [*rows, row(HOURS[3], origin="backfill")]
    assert found(backfilled, pauses=[(HOURS[2], None)]) == [("lost", HOURS[5])]


def closed(slot: datetime, status: str, started: datetime | None = None, run: str = "") -> Run:
    return Run(wid(slot), run or f"run-{slot.hour}", status, slot, started or slot)


def test_outcomes_disagree_one_way_or_the_other():
    rows = [row(HOURS[0]), row(HOURS[1], "failed"), row(HOURS[2], "compensated")] + [
        row(h) for h in HOURS[3:]
    ]
    runs = [closed(HOURS[0], "TERMINATED"), closed(HOURS[1], "COMPLETED")]
    runs += [closed(HOURS[2], "FAILED")] + [closed(h, "COMPLETED") for h in HOURS[3:]]
    assert found(rows, runs=runs) == [
        ("outcome_mismatch", HOURS[0]),
        ("outcome_mismatch", HOURS[1]),
    ]


def test_a_catch_up_row_is_not_judged_by_its_runs_later_failure():
    caught_up = row(HOURS[0], origin="catch-up")._replace(workflow_id=wid(HOURS[1]), run_id="run-1")
    rows = [caught_up, row(HOURS[1], "failed")] + [row(h) for h in HOURS[2:]]
    runs = [closed(HOURS[1], "FAILED")] + [closed(h, "COMPLETED") for h in HOURS[2:]]
    assert found(rows, runs=runs) == []


def test_closed_runs_without_a_row_except_by_design():
    rows = [row(h) for h in HOURS if h.hour != 4]
    failed = closed(HOURS[4], "FAILED")
    assert found(rows, runs=[failed]) == [("lost", HOURS[4]), ("missing_row", HOURS[4])]
    # Started long before its slot: a future slot, refused by design.
    early = closed(HOURS[4], "COMPLETED", started=HOURS[4] - timedelta(days=3))
    assert found(rows, runs=[early]) == [("lost", HOURS[4])]
    # A no-op re-run of a completed slot, and a failed run a later one finished.
    again = [closed(HOURS[0], "COMPLETED", run="rerun"), closed(HOURS[1], "FAILED", run="x")]
    assert found(rows, runs=again) == [("lost", HOURS[4])]
    # Still running (as described): not judged yet.
    in_flight = closed(HOURS[4], "RUNNING")
    assert found(rows, runs=[in_flight]) == [("lost", HOURS[4])]


def test_a_slot_a_backfill_asked_for_needs_a_row_whatever_the_timing_or_a_pause():
    """Asked for before the timing took effect (not judged by it), under a pause (excused
    by it), or judged by coverage anyway (one finding, not two)."""
    before = DAY - timedelta(hours=1)
    asked = {s: {"id": 7, "requested_at": DAY} for s in (before, HOURS[2], HOURS[4])}
    rows = [row(h) for h in HOURS if h.hour not in (2, 3, 4)]
    history = ledger(rows, [(HOURS[2], HOURS[3] + timedelta(minutes=1))])
    history.asked = {"hourly": asked}
    window = Window(before, WINDOW.end, WINDOW.now, WINDOW.settle, WINDOW.late, WINDOW.late)
    findings, _ = judge([JOB], history, Visibility(), {"hourly": RUNNING}, window)
    assert [(f.kind, f.slot, f.witnesses.get("backfill_id")) for f in findings] == [
        ("lost", before, 7),
        ("lost", HOURS[2], 7),
        ("lost", HOURS[4], None),  # due by the timing: coverage's finding
    ]


def test_of_a_runtime_pause_s_grace_only_the_slots_not_decided_are_left_out():
    paused = HOURS[3]
    just_before, earlier = paused - PAUSE_GRACE / 2, paused - PAUSE_GRACE * 2
    legacy = Stop(paused, None)  # written before the change log kept the next slot
    assert legacy.excuses(just_before) and legacy.excuses(paused)
    assert not legacy.excuses(earlier)
    decided = Stop(paused, None, known=True, next_fire_at=paused)
    assert not decided.excuses(just_before) and decided.excuses(paused)
    behind = Stop(paused, None, known=True, next_fire_at=earlier)
    assert behind.excuses(just_before) and not behind.excuses(earlier)
    exhausted = Stop(paused, None, known=True, next_fire_at=None)
    assert not exhausted.excuses(just_before)
    resumed = Stop(paused, HOURS[4], known=True, next_fire_at=paused)
    assert resumed.excuses(HOURS[4]) and not resumed.excuses(HOURS[5])
