"""Run a catalog job now, as `python -m schedules trigger JOB --wait` does, from a test."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from temporalio.client import Client

from schedules import RunOutcome, trigger, wait_for_run


async def run_now(client: Client, job_id: str, timeout: float = 60.0) -> RunOutcome:
    """Trigger one run of the synced job `job_id` (paused or not) and wait until it ends;
    how it ended (`outcome.status`, `outcome.counts`; `outcome.ok` if it completed)."""
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
