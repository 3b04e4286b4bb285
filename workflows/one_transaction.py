"""`OneTransactionJobWorkflow`: the workflow type of the runs of a kind whose slot work
fits in one transaction (`workflows.job_run.JobRunWorkflow` holds what a run does).

Declared in a module of its own: a strict sandbox (the workflow tier's, the replay tests')
imports a run's workflow module afresh for every run, and `workflow.defn` inspects the class
each time, so a run of this type does not declare `ScheduledJobWorkflow` too
(`workflows.scheduled_job`). Workers take the module as imported once
(`worker.run.WORKFLOW_LOGIC`).
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.common.dependency_models import UPSTREAM_SETTLED_SIGNAL

from workflows.job_run import JobRunWorkflow
from workflows.models import JobRun, JobRunResult


@workflow.defn(name="OneTransactionJobWorkflow")
class OneTransactionJobWorkflow:
    """A run of a kind whose slot work fits in one transaction: it begins in its work
    activity, which plans, claims, works and completes the slot in ONE transaction, with no
    `begin_run` (docs/architecture.md, The cost of one run). Sync starts it for such jobs
    (`workflows.scheduled_job.workflow_for`); a worker of a release without this type
    leaves its tasks to one that has it, so no run of either type ever takes a path its
    history does not know. Only `run` and the signal here: `workflow.defn` inspects each
    member, for every run."""

    def __init__(self) -> None:
        self._job = JobRunWorkflow(in_work=True)

    @workflow.signal(name=UPSTREAM_SETTLED_SIGNAL)
    def upstream_settled(self) -> None:
        """An upstream slot this run waits for settled: check again now."""
        self._job.upstream_settled()

    @workflow.run
    async def run(self, job: JobRun) -> JobRunResult:
        return await self._job.run(job)
