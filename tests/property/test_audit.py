"""The audit's judgement (`schedules.audit.checks.judge`, pure over the history as data) on
random recorded histories with anomalies injected at random slots: it names exactly the
injected ones, each at its slot, and nothing else.

A clean history here is what the engine records for a job firing every N minutes (UTC, so
the fire times are plain arithmetic): one completed `scheduled` row per fire time, claimed
within the lateness limit (up to the limit itself), and its run COMPLETED in Temporal.
The anomalies, each at a slot of its own:

- lost: no row and no run for a fire time;
- late: claimed after the limit;
- unexpected: a completed scheduled row (and its run) at a time that is not a fire time;
- orphan_running: a row left `running` whose run closed, or that Temporal does not have;
- stale_write / duplicated: rows of the SQL checks (a write under a superseded attempt,
  several outbox rows for one cause), which the judgement reports for their slot.
"""

from __future__ import annotations

from collections import namedtuple
from datetime import UTC, datetime, timedelta

from hypothesis import given, note
from hypothesis import strategies as st

from schedules.audit.checks import judge
from schedules.audit.history import Ledger, Run, Visibility, Window
from schedules.catalog.model import parse_catalog
from schedules.health.check import ScheduleState

Row = namedtuple(
    "Row",
    "id job_name scheduled_at status attempt origin workflow_id run_id started_at "
    "finished_at error",
)
LATE = timedelta(minutes=5)
SETTLE = timedelta(minutes=10)
KINDS = ["lost", "late", "unexpected", "orphan_running", "stale_write", "duplicated"]


def wid(slot: datetime) -> str:
    return f"job-{slot:%Y-%m-%dT%H:%M:%SZ}"


@st.composite
def histories(draw):
    every = draw(st.sampled_from([10, 15, 20, 30, 60]))
    start = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=every * draw(st.integers(0, 9000)))
    fires = [start + timedelta(minutes=every * i) for i in range(draw(st.integers(1, 40)))]
    end = fires[-1] + timedelta(minutes=every)
    slots = st.sampled_from(fires)
    injected = draw(st.dictionaries(slots, st.sampled_from(KINDS), max_size=min(len(fires), 6)))
    return every, start, end, fires, injected


def history(every, fires, injected, draw) -> tuple[Ledger, Visibility, list[tuple[str, datetime]]]:
    rows, runs, running = {}, [], {}
    stale, duplicates, expected = [], [], []
    for i, slot in enumerate(fires, start=1):
        kind = injected.get(slot)
        if kind == "lost":
            expected.append(("lost", slot))
            continue
        delay = timedelta(seconds=draw(st.integers(0, int(LATE.total_seconds()))))
        if kind == "late":
            delay = LATE + timedelta(seconds=draw(st.integers(1, 3600)))
            expected.append(("late", slot))
        status = "running" if kind == "orphan_running" else "completed"
        run_id = f"run-{i}"
        rows[slot] = Row(
            i,
            "job",
            slot,
            status,
            1,
            "scheduled",
            wid(slot),
            run_id,
            slot + delay,
            None if status == "running" else slot + delay,
            None,
        )
        if kind == "orphan_running":
            closed = draw(st.sampled_from(["COMPLETED", "FAILED", "TERMINATED", None]))
            running[(wid(slot), run_id)] = closed
            if closed is not None:
                runs.append(Run(wid(slot), run_id, closed, slot, slot))
            expected.append(("orphan_running", slot))
            continue
        runs.append(Run(wid(slot), run_id, "COMPLETED", slot, slot))
        if kind == "unexpected":
            odd = slot + timedelta(minutes=draw(st.integers(1, every - 1)))
            rows[odd] = Row(
                1000 + i,
                "job",
                odd,
                "completed",
                1,
                "scheduled",
                wid(odd),
                f"odd-{i}",
                odd,
                odd,
                None,
            )
            runs.append(Run(wid(odd), f"odd-{i}", "COMPLETED", odd, odd))
            expected.append(("unexpected", odd))
        if kind == "stale_write":
            stale.append(
                {
                    "job_name": "job",
                    "scheduled_at": slot,
                    "what": "outbox insert",
                    "execution_id": i,
                    "attempt": 1,
                    "newer_attempt": 2,
                    "journal_seq": 3,
                    "takeover_seq": 2,
                    "txid": 99,
                    "outbox_ids": [i],
                }
            )
            expected.append(("stale_write", slot))
        if kind == "duplicated":
            duplicates.append(
                {
                    "job_name": "job",
                    "scheduled_at": slot,
                    "type": "email",
                    "outbox_ids": [i, i + 1],
                    "delivered": 2,
                    "execution_id": i,
                    "attempts": [1, 2],
                }
            )
            expected.append(("duplicated", slot))
    bounds = {"job": (min(rows), max(rows))} if rows else {}
    ledger = Ledger({"job": rows}, bounds, stale, duplicates, [], [], [], {"job": []})
    return ledger, Visibility(runs={"job": runs}, running=running), sorted(expected)


@given(histories(), st.data())
def test_the_audit_names_exactly_the_injected_anomalies(case, data) -> None:
    every, start, end, fires, injected = case
    ledger, visibility, expected = history(every, fires, injected, data.draw)
    note(f"every {every}m from {start}: injected {sorted((k, s) for s, k in injected.items())}")
    job = parse_catalog(
        {"job": {"kind": "invoice-reminders", "cron": f"*/{every} * * * *", "timezone": "UTC"}}
    )[0]
    if every == 60:
        job = parse_catalog(
            {"job": {"kind": "invoice-reminders", "cron": "0 * * * *", "timezone": "UTC"}}
        )[0]
    window = Window(start, end, end + SETTLE, SETTLE, LATE, LATE)
    state = ScheduleState(True, True, False, timing_since=start)
    findings, _ = judge([job], ledger, visibility, {"job": state}, window)
    assert sorted((f.kind, f.slot) for f in findings) == expected
