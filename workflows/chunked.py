"""`ChunkedJobWorkflow`: the workflow type of the runs of a kind that works in fenced chunks
(`JobRun.chunked`), begun in a local activity in the run's first workflow task
(`workflows.job_run.JobRunWorkflow` holds what a run does).

That local activity is the kind's work activity given the run's start: it plans the run,
claims its first slot and does the work's first chunk in ONE transaction
(`activities.run.begin.begin_and_work`), and completes the slot there if the work ended within
that chunk, so a small run costs what a one-transaction kind's run does
(`LocalTransactionJobWorkflow`). A run with more work saved its first chunk's progress in
that transaction; the same workflow task schedules the work activity through the server
(heartbeats, retries, take-over by another replica), which resumes from the saved progress
in fenced chunks as any chunked attempt does.

A type of its own, not a `workflow.patched` branch of `ScheduledJobWorkflow`: a run of one
type never changes path (a worker of a release without the type leaves its tasks to one
that has it), and the SDK would record a patch marker and a search-attribute upsert in
every run's history (docs/architecture.md, Compatibility shims and patches). Declared in a
module of its own, as each workflow type is: a strict sandbox imports a run's workflow
module afresh for every run. Workers take the module as imported once
(`worker.run.WORKFLOW_LOGIC`).
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.common.dependency_models import UPSTREAM_SETTLED_SIGNAL

from workflows.job_run import JobRunWorkflow
from workflows.models import JobRun, JobRunResult


@workflow.defn(name="ChunkedJobWorkflow")
class ChunkedJobWorkflow:
    """A run of a kind that works in chunks, begun in its work activity run as a local
    activity: plan, claim and first chunk in ONE transaction (and the completion, when the
    work ended there), the rest of the work in its work activity. Sync starts it for such
    jobs (`workflows.workflow_for`). Only `run` and the signal here: `workflow.defn`
    inspects each member, for every run."""

    def __init__(self) -> None:
        self._job = JobRunWorkflow(in_work=True, local_work=True, chunked=True)

    @workflow.signal(name=UPSTREAM_SETTLED_SIGNAL)
    def upstream_settled(self) -> None:
        """An upstream slot this run waits for settled: check again now."""
        self._job.upstream_settled()

    @workflow.run
    async def run(self, job: JobRun) -> JobRunResult:
        return await self._job.run(job)
