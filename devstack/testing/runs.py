"""Run a slot now and wait for its end, from a test: a catalog job's, as `python -m schedules
trigger JOB --wait` does, or a runtime schedule's, as `tenants trigger ID --wait` does."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from temporalio.client import Client

from activities.runtime.models import RuntimeRunResult
from schedules import RunOutcome, tenants, trigger, wait_for_run


async def run_now(client: Client, job_id: str, timeout: float = 60.0) -> RunOutcome:
    """Trigger one run of the synced job `job_id` (paused or not) and wait until it ends;
    how it ended (`outcome.status`, `outcome.counts`, `outcome.slot`)."""
    deadline = time.monotonic() + timeout
    started = await trigger(client, job_id, datetime.now(UTC), timeout=min(timeout, 10.0))
    action = started.action
    return await wait_for_run(
        client,
        action.workflow_id,
        action.first_execution_run_id,
        started.scheduled_at,
        "manual",
        deadline,
    )


async def run_slot_now(
    database_url: str, client: Client, task_queue: str, schedule_id: int, timeout: float = 60.0
) -> RunOutcome:
    """Run one slot of the runtime schedule `schedule_id` now (paused or not: a manual run,
    started on `task_queue` at once) and wait until it ends; how it ended."""
    deadline = time.monotonic() + timeout
    done = await tenants.trigger(
        database_url, schedule_id, by="test", client=client, task_queue=task_queue
    )
    assert done.started, f"the slot's run did not start: {done.not_started or done.already}"
    (intent,) = done.recorded
    return await wait_for_run(
        client,
        intent.workflow_id,
        None,
        intent.scheduled_at,
        "manual",
        deadline,
        result_type=RuntimeRunResult,
    )
