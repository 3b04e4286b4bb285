"""`explain`'s verdicts, one per reason, from evidence built by hand (the clock is a value)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from activities.catchup.backfills import BackfillRequest
from schedules.catalog.model import parse_catalog
from schedules.health.explain import Evidence, explain, format_verdict
from schedules.pauses import paused_by_text
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
        evidence(
            schedule=ServerState(exists=True, managed=True, paused=True, note="incident 7"),
            paused_by="alice with `schedules pause` at 2026-11-20T01:00:00Z",
        ),
        False,
        "the schedule is paused by alice with `schedules pause` at 2026-11-20T01:00:00Z "
        "(incident 7)",
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


def test_explain_says_what_a_business_calendar_did_to_the_slot():
    """monthly-billing's 1 January 2027 ran on Monday the 4th (New Year's Day, then the
    weekend); card-settlement's minutes of Saturday 2 January are skipped by its calendar."""
    from schedules.catalog.model import default_catalog

    billing = default_catalog()["monthly-billing"]
    slot = datetime(2027, 1, 1, 8, tzinfo=UTC)
    monday = datetime(2027, 1, 4, 8, tzinfo=UTC)
    assert billing.timing.run_at(slot) == monday
    note = billing.timing.what_of(slot)
    ran = explain(
        evidence(
            job=billing,
            fire=slot,
            now=monday + timedelta(hours=1),
            calendar=note,
            run_at=monday,
            row=row("completed"),
        )
    )
    assert ran.ran is True
    assert ran.details[0] == (
        "calendar: moved from Fri 2027-01-01 03:00 to Mon 2027-01-04: US holiday "
        "(New Year's Day); runs at 2027-01-04T08:00:00Z"
    )
    early = explain(
        evidence(
            job=billing,
            fire=slot,
            now=datetime(2027, 1, 2, tzinfo=UTC),
            calendar=note,
            run_at=monday,
        )
    )
    assert (early.ran, early.reason) == (False, "not_due")
    settlement = default_catalog()["card-settlement"]
    saturday = datetime(2027, 1, 2, 15, tzinfo=UTC)
    assert settlement.timing.run_at(saturday) is None
    skipped = explain(
        evidence(
            job=settlement,
            fire=saturday,
            now=NOW + timedelta(days=30),
            calendar=settlement.timing.what_of(saturday),
            run_at=None,
        )
    )
    assert (skipped.ran, skipped.reason) == (False, "calendar_skipped")
    assert skipped.text == (
        "its business calendar does not run it: skipped on Sat 2027-01-02: weekend "
        "(on_holiday skip)"
    )


def test_explain_finds_a_manual_run_at_its_own_time():
    """A trigger's slot is its time, off the job's grid: its row is the verdict."""
    manual = FIRE + timedelta(hours=1, seconds=7, microseconds=123456)
    ran = explain(evidence(fire=manual, on_grid=False, row=row("completed", origin="manual")))
    assert (ran.reason, ran.ran) == ("completed", True)
    assert ran.text.endswith("attempt 1, manual run"), ran.text


def test_who_paused_a_job_is_said_from_its_recorded_pause():
    at = datetime(2026, 11, 20, 1, tzinfo=UTC)
    by_hand = {"paused_by": "pause", "requested_by": "alice", "paused_at": at, "note": "x"}
    assert paused_by_text(by_hand) == "alice with `schedules pause` at 2026-11-20T01:00:00Z"
    older = by_hand | {"requested_by": None}  # recorded before who was
    assert paused_by_text(older).startswith("an operator with `schedules pause`")
    by_sync = by_hand | {"paused_by": "sync", "requested_by": None}
    assert paused_by_text(by_sync) == "the catalog's `paused = true`"
    assert paused_by_text(None, catalog=True) == "the catalog's `paused = true`"
    assert paused_by_text(None) == "someone in the Temporal UI or CLI, who is not recorded"
