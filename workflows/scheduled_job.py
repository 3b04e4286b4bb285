"""`ScheduledJobWorkflow`: the workflow type of a scheduled job's runs
(`workflows.job_run.JobRunWorkflow` holds what a run does).

Only this type is declared here: a strict sandbox (the workflow tier's, the replay tests')
imports a run's workflow module afresh for every run, and `workflow.defn` inspects the class
each time, so a run of this type does not declare `OneTransactionJobWorkflow` too
(`workflows.one_transaction`), nor the other way. Workers take the module as imported once
(`worker.run.WORKFLOW_LOGIC`).
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.common.dependency_models import UPSTREAM_SETTLED_SIGNAL

from workflows.job_run import (
    BEGIN_RUN_PATCH,
    CALENDAR_PATCH,
    SCHEDULED_BY_ID,
    SCHEDULED_START_TIME,
    JobRunWorkflow,
    begins_in_work,
)
from workflows.models import JobRun, JobRunResult

__all__ = [
    "BEGIN_RUN_PATCH",
    "CALENDAR_PATCH",
    "SCHEDULED_BY_ID",
    "SCHEDULED_START_TIME",
    "ScheduledJobWorkflow",
    "begins_in_work",
    "workflow_for",
]


@workflow.defn
class ScheduledJobWorkflow:
    """A run of a scheduled job: begin (plan and claim, in `begin_run`), run the slots,
    summarise (`JobRunWorkflow.run`). Only `run` and the signal here: `workflow.defn`
    inspects each member, for every run."""

    def __init__(self) -> None:
        self._job = JobRunWorkflow()

    @workflow.signal(name=UPSTREAM_SETTLED_SIGNAL)
    def upstream_settled(self) -> None:
        """An upstream slot this run waits for settled: check again now."""
        self._job.upstream_settled()

    @workflow.run
    async def run(self, job: JobRun) -> JobRunResult:
        return await self._job.run(job)


def workflow_for(job: JobRun) -> Any:
    """The workflow run method that runs `job`: `LocalTransactionJobWorkflow` for a job
    whose runs begin in their work activity (which it runs as a local activity),
    `ChunkedJobWorkflow` for a chunked kind's job whose runs begin so, else
    `ScheduledJobWorkflow`. `OneTransactionJobWorkflow` (the same work through the server)
    is no longer started: workers keep it for the runs that schedules synced before v7
    start. Called by the clients that start runs (sync, the bench), never in a workflow:
    its import is here so that a run of this type does not import the other types'
    modules."""
    if begins_in_work(job) and job.one_transaction:
        from workflows.local_transaction import LocalTransactionJobWorkflow

        return LocalTransactionJobWorkflow.run
    if begins_in_work(job):
        from workflows.chunked import ChunkedJobWorkflow

        return ChunkedJobWorkflow.run
    return ScheduledJobWorkflow.run
