"""`python -m schedules sync` against the real dev server."""

from __future__ import annotations

import os
import subprocess
import sys
from zoneinfo import ZoneInfo

import pytest
from temporalio.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleOverlapPolicy,
    ScheduleSpec,
)

from schedules.catalog import INVOICE_REMINDERS
from schedules.sync import sync
from tests.conftest import ROOT, settings_env
from worker.errors import CatalogError


async def test_sync_creates_then_updates_and_keeps_an_operators_pause(client, settings):
    env = settings_env(settings)
    first = subprocess.run(
        [sys.executable, "-m", "schedules", "sync"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert first.returncode == 0, first.stderr
    assert "created  invoice-reminders" in first.stdout
    handle = client.get_schedule_handle("invoice-reminders")
    try:
        described = await handle.describe()
        # The server keeps cron as calendars: read its next fire times instead.
        assert described.schedule.spec.time_zone_name == "Europe/London"
        upcoming = [
            t.astimezone(ZoneInfo("Europe/London")) for t in described.info.next_action_times
        ]
        assert upcoming and {(t.hour, t.minute) for t in upcoming} == {(2, 30)}
        assert described.schedule.policy.overlap == ScheduleOverlapPolicy.SKIP
        assert await described.memo_value("managed-by") == "scheduled-jobs"
        assert described.schedule.action.task_queue == settings.temporal_task_queue

        await handle.pause(note="paused by on-call: ledger migration")
        second = subprocess.run(
            [sys.executable, "-m", "schedules", "sync"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        assert second.returncode == 0, second.stderr
        assert "updated  invoice-reminders" in second.stdout
        state = (await handle.describe()).schedule.state
        assert state.paused and state.note == "paused by on-call: ledger migration"
    finally:
        await handle.delete()


async def test_sync_refuses_a_schedule_it_does_not_manage(client, task_queue):
    await client.create_schedule(
        INVOICE_REMINDERS.id,
        Schedule(
            action=ScheduleActionStartWorkflow("SomeoneElsesWorkflow", id="x", task_queue="other"),
            spec=ScheduleSpec(cron_expressions=["0 0 * * *"]),
        ),
    )
    handle = client.get_schedule_handle(INVOICE_REMINDERS.id)
    try:
        with pytest.raises(CatalogError, match="not managed by this project"):
            await sync(client, [INVOICE_REMINDERS], task_queue)
        described = await handle.describe()
        assert described.schedule.action.workflow == "SomeoneElsesWorkflow"
    finally:
        await handle.delete()


def test_sync_with_temporal_unreachable_fails_with_one_line():
    env = {k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_")}
    env["TEMPORAL_ADDRESS"] = "127.0.0.1:1"
    done = subprocess.run(
        [sys.executable, "-m", "schedules", "sync", "--wait", "2"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "cannot reach Temporal at 127.0.0.1:1 within 2s" in done.stderr
    assert "Traceback" not in done.stderr
