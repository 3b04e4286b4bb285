"""A catalog job's state on the dashboard's list (api/pages/catalog.py: `job_state`), from
what Temporal's listing and the ledger say, at a given `now`: no servers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from temporalio.client import ScheduleActionExecutionStartWorkflow, ScheduleActionResult

from api.pages.catalog import job_state
from schedules.catalog.model import JobSpec
from schedules.server.state import ServerState

NOW = datetime(2026, 12, 8, 9, 30, tzinfo=UTC)
DUE = datetime(2026, 12, 8, 9, 0, tzinfo=UTC)  # the newest fire time over a minute past
BEFORE = DUE - timedelta(hours=1)
JOB = JobSpec.model_validate(
    {"id": "hourly", "kind": "invoice-reminders", "cron": "0 * * * *", "timezone": "UTC"}
)


def started(*slots: datetime) -> list[ScheduleActionResult]:
    return [
        ScheduleActionResult(slot, slot, ScheduleActionExecutionStartWorkflow(f"hourly-{i}", "r"))
        for i, slot in enumerate(slots)
    ]


def listed(**fields) -> ServerState:
    return ServerState(
        exists=True, managed=True, **({"next_times": [NOW + timedelta(minutes=30)]} | fields)
    )


def run(slot: datetime, status: str = "completed") -> dict:
    return {"scheduled_at": slot, "status": status}


@pytest.mark.parametrize(
    ("server", "last", "pause", "state"),
    [
        (None, None, None, "unknown"),  # Temporal could not be asked
        (ServerState(exists=False), None, None, "not synced"),
        (ServerState(exists=True, managed=False), None, None, "not synced"),
        (listed(paused=True, note="close"), None, {"paused_by": "pause"}, "paused"),
        (listed(paused=True), None, None, "paused"),  # the catalog's or the Temporal UI's
        (listed(paused=True), run(DUE, "failed"), {"paused_by": "auto"}, "auto-paused"),
        (listed(recent=started(DUE)), run(DUE, "failed"), None, "failing"),
        (listed(recent=started(DUE)), run(DUE), None, "active"),
        # Started and not recorded: no worker took it.
        (listed(recent=started(BEFORE, DUE)), run(BEFORE), None, "late"),
        (listed(recent=started(DUE)), None, None, "late"),
        # Not started (paused then, or the schedule is newer): explain says why, not late.
        (listed(recent=started(BEFORE)), run(BEFORE), None, "active"),
        (listed(), None, None, "active"),
        # Temporal's own next start is past: its scheduler is behind.
        (listed(next_times=[NOW - timedelta(minutes=5)]), run(BEFORE), None, "late"),
    ],
)
def test_a_catalog_jobs_state(server, last, pause, state):
    assert job_state(JOB, server, last, pause, NOW) == state
