"""Start a `ScheduledJobWorkflow` run as its schedule would, on a worker of stand-ins."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.client import WorkflowHandle
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from tests.workflow.kind import BatchStepsWorkflow
from tests.workflow.stand_ins import WORK, StandIns
from timing import Timing
from worker.run import workflow_runner
from workflows import (
    ChunkedJobWorkflow,
    JobRun,
    JobRunResult,
    LocalTransactionJobWorkflow,
    OneTransactionJobWorkflow,
    RetrySettings,
    ScheduledJobWorkflow,
    workflow_for,
)

SLOT = datetime(2026, 11, 30, 2, 30, tzinfo=UTC)
SCHEDULED_START_TIME = SearchAttributeKey.for_datetime("TemporalScheduledStartTime")


def job(**fields: Any) -> JobRun:
    """An hourly job of a one-activity kind; `fields` override."""
    defaults: dict[str, Any] = {
        "job_name": "stand-in-job",
        "activity": WORK,
        "timing": Timing(cron="30 * * * *", timezone="UTC"),
        "retry": RetrySettings(initial_interval_seconds=0.1, maximum_attempts=3),
    }
    return JobRun(**(defaults | fields))


def steps_job(**fields: Any) -> JobRun:
    """A job of the three-step kind (`tests/workflow/kind.py`)."""
    return job(**({"activity": "", "workflow": BatchStepsWorkflow.__name__} | fields))


@asynccontextmanager
async def stand_in_worker(
    env: WorkflowEnvironment, stand_ins: StandIns, more: Sequence[Callable[..., Any]] = ()
) -> AsyncIterator[str]:
    """A worker on a fresh task queue: the real workflows, the stand-in activities (and
    `more` of them)."""
    task_queue = f"workflow-{uuid.uuid4().hex[:12]}"
    async with Worker(
        env.client,
        task_queue=task_queue,
        workflows=[
            ScheduledJobWorkflow,
            OneTransactionJobWorkflow,
            LocalTransactionJobWorkflow,
            ChunkedJobWorkflow,
            BatchStepsWorkflow,
        ],
        activities=[*stand_ins.activities(), *more],
        workflow_runner=workflow_runner(strict=True),
        max_heartbeat_throttle_interval=timedelta(milliseconds=100),
    ):
        yield task_queue


async def start(
    env: WorkflowEnvironment,
    task_queue: str,
    run: JobRun,
    slot: datetime | None = SLOT,
    workflow: Any = None,
) -> WorkflowHandle[Any, JobRunResult]:
    """Start a run as the schedule does for `slot` (its nominal time in
    `TemporalScheduledStartTime`); `slot=None`: started by hand, without a schedule.
    `workflow`: the type's run method (default: the one sync starts, `workflow_for`)."""
    attributes = TypedSearchAttributes(
        [] if slot is None else [SearchAttributePair(SCHEDULED_START_TIME, slot)]
    )
    when = "direct" if slot is None else f"{slot:%Y-%m-%dT%H:%M:%SZ}"
    return await env.client.start_workflow(
        workflow or workflow_for(run),
        run,
        id=f"{run.job_name}-{when}-{uuid.uuid4().hex[:6]}",
        task_queue=task_queue,
        search_attributes=attributes,
        result_type=JobRunResult,
    )


async def run_to_end(
    env: WorkflowEnvironment,
    stand_ins: StandIns,
    run: JobRun,
    slot: datetime | None = SLOT,
    workflow: Any = None,
) -> JobRunResult:
    """Run one job run on the stand-ins to its end; its result."""
    async with stand_in_worker(env, stand_ins) as task_queue:
        handle = await start(env, task_queue, run, slot, workflow)
        return await handle.result()
