"""Every run is bounded, and `schedules compat` finds open runs of retired code.

Against the real Temporal dev server: sync writes each job's bound as its schedule's
execution timeout, a runtime run is started with its bound, and `compat` reports nothing
when no run of a retired type is open and names one that is (a run started directly, of a
type no worker serves, under a rule that flags its start time).
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

from temporalio.client import ScheduleUpdate, ScheduleUpdateInput

from activities.common.lifetime import RUNTIME_RUN_LIFETIME
from activities.runtime.start import Intent, start_intent
from schedules.catalog.durations import format_duration
from schedules.catalog.model import parse_catalog
from schedules.compat import Retired, open_retired_runs
from schedules.sync.apply import sync
from schedules.sync.plan import plan as plan_sync
from tests.helpers import assert_eventually
from tests.helpers.worker import schedules_cli


async def test_sync_gives_each_run_its_bound_and_a_runtime_run_starts_with_one(client, task_queue):
    job_id = f"bounded-{uuid.uuid4().hex[:10]}"
    table = {"kind": "invoice-reminders", "cron": "0 6 1 1 *", "timezone": "UTC"}
    (job,) = parse_catalog({job_id: table | {"paused": True, "timeout": "2h"}})
    await sync(client, (job,), task_queue, prune=False)
    handle = client.get_schedule_handle(job_id)
    try:
        described = await handle.describe()
        assert described.schedule.action.execution_timeout == job.lifetime
        assert job.lifetime > 10 * 10 * timedelta(hours=2)  # every attempt of every series

        # A schedule as a sync before the bound left it: the next sync gives it one.
        def unbounded(update: ScheduleUpdateInput) -> ScheduleUpdate:
            update.description.schedule.action.execution_timeout = None
            return ScheduleUpdate(schedule=update.description.schedule)

        await handle.update(unbounded)
        report, _ = await plan_sync(client, (job,), task_queue, prune=False, full=True)
        (change,) = report.changes
        assert change.action == "update"
        assert change.fields["run bound"] == ("none", format_duration(job.lifetime))
    finally:
        await client.get_schedule_handle(job_id).delete()

    # A runtime slot's run, on a queue no worker polls: started with the runtime bound.
    queue = f"unpolled-{uuid.uuid4().hex[:10]}"
    slot = datetime(2026, 12, 1, 9, tzinfo=UTC)
    workflow_id = f"rt-bounded-{uuid.uuid4().hex[:10]}"
    intent = Intent(1, slot, "manual", workflow_id, "t", "s", "weekly-report")
    assert await start_intent(client, queue, workflow_id, intent, attributes=False)
    handle = client.get_workflow_handle(workflow_id)
    try:
        description = await handle.describe()
        config = description.raw_description.execution_config
        assert config.workflow_execution_timeout.ToTimedelta() == RUNTIME_RUN_LIFETIME
    finally:
        await handle.terminate("test done")


async def test_compat_reports_none_open_then_names_an_open_run_the_rule_flags(client, settings):
    # The shipped rules: the test server has no run that started before their releases.
    done = schedules_cli(settings, "compat", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["retired_runs_open"] == 0 and len(report["rules"]) >= 2
    assert all(rule["open"] == 0 for rule in report["rules"])

    # A run of a retired type, still open: no worker polls its queue.
    kind = f"RetiredWorkflow{uuid.uuid4().hex[:8]}"
    workflow_id = f"retired-{uuid.uuid4().hex[:10]}"
    handle = await client.start_workflow(
        kind, id=workflow_id, task_queue=f"unpolled-{uuid.uuid4().hex[:10]}"
    )
    try:
        started = (await handle.describe()).start_time
        flagged = Retired("the test's retired type", (kind,), started + timedelta(seconds=1))
        earlier = Retired("runs before this one", (kind,), started - timedelta(seconds=1))

        async def found() -> None:
            runs = await open_retired_runs(client, (flagged, earlier))
            assert [(f.count, f.workflow_ids) for f in runs] == [(1, (workflow_id,)), (0, ())]

        await assert_eventually(found)  # visibility lags the start a little

        # `--started-before` moves every rule's time: the shipped rules' types still
        # have none open, whatever the time.
        later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
        moved = schedules_cli(settings, "compat", "--started-before", later)
        assert moved.returncode in (0, 1), moved.stderr
        assert moved.stdout.startswith("retired_runs_open: ")
        assert f"in namespace {settings.temporal_namespace}" in moved.stdout
    finally:
        await handle.terminate("test done")

    async def closed() -> None:
        runs = await open_retired_runs(client, (flagged,))
        assert runs[0].count == 0

    await assert_eventually(closed)


def test_compat_refuses_a_time_without_an_offset_in_one_line(settings):
    done = schedules_cli(settings, "compat", "--started-before", "2026-12-01T12:00:00")
    assert done.returncode == 2
    assert "give the offset (Z or +01:00): '2026-12-01T12:00:00'" in done.stderr
    assert "Traceback" not in done.stderr
