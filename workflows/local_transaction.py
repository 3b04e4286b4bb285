"""`LocalTransactionJobWorkflow`: the workflow type of the runs of a kind whose slot work
fits in one transaction, that transaction run as a local activity in the run's first
workflow task (`workflows.job_run.JobRunWorkflow` holds what a run does).

What it saves over `OneTransactionJobWorkflow` (whose runs schedule the same work activity
through the server): one workflow task a run instead of two, 6 history events instead of
11 (the work's result is a marker in the task that completes the run), 2 calls to the
server's frontend instead of 4. What keeps it exactly once is what kept the activity: the
plan, the claim (the slot's row, unique per job and slot), the work, its outbox rows and
the completion commit in one transaction, or nothing does (docs/architecture.md, The cost
of one run). A worker that dies or freezes in the middle holds the workflow task past its
timeout: the server hands the task to another worker, whose attempt waits on the
uncommitted row and then either finds it completed or claims it afresh.

Declared in a module of its own, as each workflow type is: a strict sandbox imports a run's
workflow module afresh for every run. Workers take the module as imported once
(`worker.run.WORKFLOW_LOGIC`).
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.common.dependency_models import UPSTREAM_SETTLED_SIGNAL

from workflows.job_run import JobRunWorkflow
from workflows.models import JobRun, JobRunResult


@workflow.defn(name="LocalTransactionJobWorkflow")
class LocalTransactionJobWorkflow:
    """A run of a kind whose slot work fits in one transaction, begun in its work run as a
    local activity: plan, claim, work and completion in ONE transaction, in the workflow
    task that starts the run. Sync starts it for such jobs (`workflows.workflow_for`); a
    worker of a release without this type leaves its tasks to one that has it. Only `run`
    and the signal here: `workflow.defn` inspects each member, for every run."""

    def __init__(self) -> None:
        self._job = JobRunWorkflow(in_work=True, local_work=True)

    @workflow.signal(name=UPSTREAM_SETTLED_SIGNAL)
    def upstream_settled(self) -> None:
        """An upstream slot this run waits for settled: check again now."""
        self._job.upstream_settled()

    @workflow.run
    async def run(self, job: JobRun) -> JobRunResult:
        return await self._job.run(job)
