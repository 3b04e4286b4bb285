"""`explain`'s verdicts, one per reason, from evidence built by hand (the clock is a value)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from schedules.catalog.model import parse_catalog
from schedules.health.explain import Evidence, explain, format_verdict
from schedules.server.backfills import BackfillRequest
from schedules.server.state import ServerState

FIRE = datetime(2026, 11, 20, 2, 30, tzinfo=UTC)
NOW = FIRE + timedelta(hours=5)
(JOB,) = parse_catalog(
    {"nightly": {"kind": "invoice-reminders", "cron": "30 2 * * *", "timezone": "Europe/London"}}
)
ACTIVE = ServerState(exists=True, managed=True)


def evidence(**fields) -> Evidence:
    base = {"job": JOB, "fire": FIRE, "now": NOW, "task_queue": "q", "schedule": ACTIVE}
    return Evidence(**(base | fields))


def row(status: str, **fields) -> dict:
    return {
        "status": status,
        "attempt": 1,
        "origin": "scheduled",
        "started_at": FIRE + timedelta(seconds=1),
        "finished_at": FIRE + timedelta(seconds=41),
        "error": None,
        "result": {"counts": {"reminded": 3}},
    } | fields


CASES = {
    "completed": (evidence(row=row("completed")), True, "ran: completed"),
    "skipped": (
        evidence(row=row("skipped", error="missed starting deadline: started 90s after")),
        False,
        "skipped: missed starting deadline",
    ),
    "failed": (
        evidence(row=row("failed", attempt=10, error="boom")),
        False,
        "failed after 10 attempt(s): boom",
    ),
    "compensated": (
        evidence(row=row("compensated", error="step 3 of 4 did not finish")),
        False,
        "failed and was compensated",
    ),
    "running": (
        evidence(row=row("running", finished_at=None), workflow_status="RUNNING", pollers=2),
        False,
        "still running",
    ),
    "waiting_for_upstream": (
        evidence(
            row=row(
                "running",
                finished_at=None,
                wait_status="waiting",
                wait_progress="waiting for hourly-sync 2026-11-20 05:00 UTC, 23 of 24 done",
                wait_began_at=FIRE + timedelta(seconds=1),
                wait_deadline=FIRE + timedelta(hours=2),
            ),
            workflow_status="RUNNING",
        ),
        False,
        "waiting since 2026-11-20 02:30:01 GMT (2026-11-20T02:30:01Z): waiting for hourly-sync",
    ),
    "abandoned": (
        evidence(row=row("running", finished_at=None), workflow_status="TERMINATED"),
        False,
        "its workflow is TERMINATED",
    ),
    "not_due": (evidence(now=FIRE - timedelta(minutes=5)), False, "not due yet"),
    "not_a_fire_time": (
        evidence(
            fire=FIRE + timedelta(minutes=1),
            on_grid=False,
            neighbours=(FIRE, FIRE + timedelta(days=1)),
        ),
        False,
        "is not a fire time",
    ),
    "repeated_hour": (
        evidence(on_grid=False, repeated_of=FIRE - timedelta(hours=1)),
        False,
        "runs once, at the first occurrence",
    ),
    "database_unreachable": (
        evidence(database_error="PostgreSQL is unavailable: timeout"),
        None,
        "cannot tell",
    ),
    "temporal_unreachable": (
        evidence(server_error="cannot reach Temporal at localhost:1"),
        None,
        "cannot tell why",
    ),
    "no_schedule": (evidence(schedule=ServerState(exists=False)), False, "no schedule"),
    "before_timing": (
        evidence(timing_since=FIRE + timedelta(hours=1)),
        False,
        "before the job's current timing took effect",
    ),
    "outside_bounds": (
        evidence(job=JOB.model_copy(update={"end_at": FIRE - timedelta(days=1)})),
        False,
        "after the schedule's end_at",
    ),
    "no_worker": (
        evidence(workflow_status="RUNNING", pollers=0),
        False,
        "no worker polls task queue 'q'",
    ),
    "waiting": (evidence(workflow_status="RUNNING", pollers=1), False, "no worker has claimed"),
    "no_record": (evidence(workflow_status="FAILED"), False, "ended (FAILED) without recording"),
    "paused": (
        evidence(schedule=ServerState(exists=True, managed=True, paused=True, note="incident 7")),
        False,
        "the schedule is paused (incident 7)",
    ),
    "not_started": (evidence(), False, "Temporal never started it"),
    "backfill_skipped": (
        evidence(
            schedule=ServerState(exists=True, managed=True, paused=True, skipped_overlap=3),
            backfill=BackfillRequest(NOW, FIRE - timedelta(days=2), FIRE, "skip"),
        ),
        False,
        "the server skipped it because of the overlap policy skip",
    ),
}


@pytest.mark.parametrize("reason", sorted(CASES))
def test_each_reason_has_its_verdict(reason):
    ev, ran, text = CASES[reason]
    verdict = explain(ev)
    assert (verdict.reason, verdict.ran) == (reason, ran)
    assert text in verdict.text
    assert verdict.exit_code == {True: 0, False: 1, None: 2}[ran]
    shown = format_verdict(ev, verdict)
    assert shown.startswith(
        f"nightly at {ev.fire:%Y-%m-%d %H:%M} GMT ({ev.fire:%Y-%m-%dT%H:%M}:00Z): "
    )
