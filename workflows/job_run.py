"""One run of a scheduled job: claim the slot, do the work, record the outcome.

A Temporal schedule starts this workflow once per fire time, with workflow id
`<job>-<scheduled time>Z`. The workflow is deterministic; every side effect happens in
activities, which make the effect exactly-once per (job, scheduled time).

A run has three steps: *begin* (find its slot, plan the slots it covers, claim the first),
*run the slots* (each claimed, worked and settled, oldest first), *summarise* (the result,
and the details the Temporal UI shows, worded by `workflows.details`, with what only the
server can tell a backfilled run, and a mark on a run that did no work: `workflows.run_notes`).
A run of a kind whose slot work fits in one transaction (`JobRun.one_transaction`) begins in
its work activity: the plan, the claim and the first slot's work in one transaction. So does
a run of a kind that works in chunks (`JobRun.chunked`, `ChunkedJobWorkflow`): the plan, the
claim and the first chunk, the rest of the work in its work activity if any is left.

The logic is `JobRunWorkflow`'s, a plain class; the workflow types that run it are
declared each in a module of its own (`workflows.scheduled_job.ScheduledJobWorkflow`,
`workflows.one_transaction.OneTransactionJobWorkflow`, and
`workflows.local_transaction.LocalTransactionJobWorkflow`, whose work is a local
activity, and `workflows.chunked.ChunkedJobWorkflow`, whose first chunk is). A strict sandbox imports a run's workflow module afresh for every run, and
`workflow.defn` inspects the class it declares each time (close to half of that import in
bench/fleet.py's profile): a run declares only its own type, once. Workers take these
modules as imported once (`worker.run.WORKFLOW_LOGIC`).
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.common import SearchAttributeKey
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from activities.catchup.missed import PlanInput
    from activities.claim.executions import ExecutionActivities
    from activities.common.dependency_models import UPSTREAM_SETTLED_SIGNAL, WaitInput
    from activities.common.models import (
        ClaimInput,
        ClaimResult,
        ExecutionRef,
        Origin,
        WorkInput,
        WorkResult,
    )
    from activities.run.begin import BeginActivities, BeginInput, BegunWork, WorkOrBegin, origins
    from timing import Timing

from workflows.attempts import with_fresh_series
from workflows.dependencies import DEPENDS_PATCH, UpstreamWait
from workflows.details import backfill_note, run_headline, showing, summary
from workflows.failures import cancelled, fail_run, message, superseded
from workflows.models import (
    BOOKKEEPING,
    STEPS_ID_SUFFIX,
    Begun,
    JobRun,
    JobRunResult,
    SlotRun,
    StepOptions,
    WorkflowJobInput,
    work_timeouts,
)
from workflows.run_notes import backfill_skips, mark_no_op

SCHEDULED_START_TIME = SearchAttributeKey.for_datetime("TemporalScheduledStartTime")
SCHEDULED_BY_ID = SearchAttributeKey.for_keyword("TemporalScheduledById")

# Runs plan and claim in one local activity (`activities.run.begin`), and record failures and
# claim catch-up slots as local activities too. The branch of runs started before it (v1,
# v2: three activities through the server) is gone; the call is deprecated (its marker in
# runs begun before this release still matches), to be removed in v8
# (docs/architecture.md, Compatibility shims and patches).
BEGIN_RUN_PATCH = "begin-run-local"
# A calendar job's fire time runs the slots its business calendar put there (`plan.own`):
# the run's own slot is one of them, and a moved slot is due at the fire time. Asked only
# by such runs, so others carry no marker. Patched in v6; deprecate_patch in v8, removed
# in v9 (docs/architecture.md).
CALENDAR_PATCH = "business-calendar"


class JobRunWorkflow:
    """What a run of a scheduled job does, held by the workflow types that run it
    (`ScheduledJobWorkflow`, `OneTransactionJobWorkflow`, `LocalTransactionJobWorkflow`,
    `ChunkedJobWorkflow`),
    which declare only `run` and the signal: `workflow.defn` inspects every member of the
    class it declares, for every run (the sandbox imports the module afresh), so the
    logic's methods live here, out of it."""

    def __init__(
        self, in_work: bool = False, local_work: bool = False, chunked: bool = False
    ) -> None:
        # Whether a run of a kind whose slot work fits in one transaction begins in its
        # work activity (`activities.run.begin.begin_and_work`): only the runs of
        # `OneTransactionJobWorkflow` and `LocalTransactionJobWorkflow`, workflow types of
        # their own, so that no run of a type ever changes path and needs no patch marker
        # for it. `local_work`: that activity runs as a local activity (the second type).
        # `chunked`: a chunked kind's run begins there too (`ChunkedJobWorkflow`).
        self._in_work = in_work
        self._local_work = local_work
        self._chunked = chunked
        self._upstream = UpstreamWait()  # a slot's wait for its upstream slots

    def upstream_settled(self) -> None:
        """An upstream slot this run waits for settled: check again now (each type's
        `upstream_settled` signal)."""
        self._upstream.nudge()

    async def run(self, job: JobRun) -> JobRunResult:
        """The run: begin, run the slots, summarise (each type's `@workflow.run`)."""
        begun = await self._begin(job)
        plan = begun.plan
        headline = run_headline(job.job_name, begun.scheduled_at, plan.local_time, plan.origin)
        if plan.calendar_note:
            headline = f"{headline}\n{plan.calendar_note}"
        workflow.set_current_details(showing(headline, "running"))
        own, caught_up = await self._run_slots(job, begun, headline)
        details = summary(headline, own, caught_up, plan.skipped, plan.gap)
        # From the server, on the paths that need it (`workflows.run_notes`).
        skips = await backfill_skips(job, begun.scheduled_at, plan.origin)
        if skips is not None:
            details += "\n\n" + backfill_note(job.job_name, skips)
        workflow.set_current_details(details)
        await mark_no_op(own, caught_up)
        return JobRunResult(
            **own.model_dump(),  # the run's own slot: time, execution, outcome, counts
            origin=plan.origin,
            job_name=job.job_name,
            caught_up=caught_up,
            missed_skipped=plan.skipped,
            catchup_gap=plan.gap,
        )

    async def _begin(self, job: JobRun) -> Begun:
        """Find the run's slot, plan the slots it covers, claim the first: one local
        activity (`activities.run.begin`), or the work activity (`_begin_in_work`)."""
        info = workflow.info()
        scheduled_at = info.typed_search_attributes.get(SCHEDULED_START_TIME)
        # Started by hand without a schedule: its own start time is its slot.
        origin: Origin = "scheduled" if scheduled_at is not None else "direct"
        if scheduled_at is None:
            scheduled_at = info.start_time.replace(microsecond=0)
        plan_input = None
        if origin != "direct" and job.timing is not None:
            plan_input = self._plan_input(job, scheduled_at, job.timing)
        claim = self._claim_input(job, scheduled_at, origin)
        # A run that waits for upstream slots claims first and works after the wait: the
        # wait sits between the two (`_run_slot`), so it cannot begin in its work activity.
        # A chunked kind's run begins there only as a `ChunkedJobWorkflow`.
        if self._in_work and begins_in_work(job) and (job.one_transaction or self._chunked):
            begin = BeginInput(plan=plan_input, claim=claim, server_now=workflow.now())
            return await self._begin_in_work(job, begin) or await self._begin_run(begin)
        # Every run plans and claims in `begin_run`; runs begun by v7 workers before this
        # release carry the patch's marker, which this call matches (docs/architecture.md).
        workflow.deprecate_patch(BEGIN_RUN_PATCH)
        return await self._begin_run(
            BeginInput(plan=plan_input, claim=claim, server_now=workflow.now())
        )

    async def _begin_run(self, begin: BeginInput) -> Begun:
        """Plan and claim the first slot in `begin_run`, a local activity."""
        begun = await workflow.execute_local_activity_method(
            BeginActivities.begin_run, begin, **BOOKKEEPING
        )
        claims = {begun.plan.run[0]: begun.claim} if begun.claim is not None else {}
        return Begun(begin.claim.scheduled_at, begun.plan, claims)

    async def _begin_in_work(self, job: JobRun, begin: BeginInput) -> Begun | None:
        """Begin in the work activity: plan, claim and work the first slot in one
        transaction. None when it declined, having done nothing (another workflow run
        holds the slot): the run begins with `begin_run`."""
        own = begin.claim.scheduled_at
        headline = run_headline(job.job_name, own, "", begin.claim.origin or "scheduled")
        workflow.set_current_details(showing(headline, "running"))
        # A kind's slot work takes the execution and params; its chunked work, the timing too.
        timing = job.timing if job.chunked and not job.one_transaction else None
        work = WorkOrBegin(begin=begin, params=job.params, timing=timing)
        try:
            if self._local_work:
                # Each attempt runs in the worker that runs the workflow task: one that timed
                # out ran and hung there, it was no retry a frozen worker absorbed.
                done = await self._work(job, work, BegunWork, local=True)
            else:
                # Every attempt that timed out rolled back, its take-over too: a new series
                # follows retries a frozen worker absorbed, with no need to ask (`None`).
                done = await with_fresh_series(
                    lambda: self._work(job, work, BegunWork), None, job.retry.maximum_attempts
                )
        except (ActivityError, ApplicationError) as err:
            # Its attempts committed nothing: record the plan and the claim, then the failure.
            # (A local activity's failure comes as the error it failed with, no ActivityError
            # around it, unless it timed out.)
            begun = await self._begin_run(begin)
            claim = begun.claims.get(begun.plan.run[0]) if begun.plan.run else None
            execution = None
            if claim is not None and claim.outcome == "claimed":
                execution = ExecutionRef(
                    execution_id=claim.execution_id,
                    job_name=job.job_name,
                    scheduled_at=begun.plan.run[0],
                )
            await self._fail(job, execution, err, own, _local_attempts(job, err, self._local_work))
        if done.declined is not None:
            workflow.logger.info("beginning with begin_run: %s", done.declined)
            return None
        if done.claim is None:
            return Begun(own, done.plan, {})
        first = done.plan.run[0]
        # Settled (skipped past its deadline), or a chunked slot whose work goes on from the
        # progress its first chunk saved: `_run_slot` runs the work activity.
        if done.claim.outcome != "claimed" or done.more:
            return Begun(own, done.plan, {first: done.claim})
        worked = WorkResult(counts=done.counts, already_completed=done.already_completed)
        return Begun(own, done.plan, {first: done.claim}, {first: worked})

    async def _run_slots(
        self, job: JobRun, begun: Begun, headline: str
    ) -> tuple[SlotRun, list[SlotRun]]:
        """Run the plan's slots, oldest first: the run's own slot and those it caught up on."""
        own = SlotRun(scheduled_at=begun.scheduled_at, outcome="skipped", reason=begun.plan.reason)
        caught_up = []
        mine = begun.scheduled_at
        moved = (
            set(begun.plan.own) if begun.plan.own and workflow.patched(CALENDAR_PATCH) else set()
        )
        if moved and mine not in moved:
            mine = max(moved)  # the fire time runs only moved slots: the newest stands for it
        for slot, origin in zip(
            begun.plan.run, origins(begun.plan, begun.scheduled_at), strict=True
        ):
            due = begun.scheduled_at if slot in moved and slot != begun.scheduled_at else None
            claim, worked = begun.claims.get(slot), begun.worked.get(slot)
            done = await self._run_slot(job, slot, origin, headline, claim, worked, due)
            if slot == mine:
                own = done
            else:
                caught_up.append(done)
        return own, caught_up

    def _plan_input(self, job: JobRun, scheduled_at: datetime, timing: Timing) -> PlanInput:
        info = workflow.info()
        return PlanInput(
            job_name=job.job_name,
            scheduled_at=scheduled_at,
            started_at=info.start_time,
            workflow_id=info.workflow_id,
            run_id=info.run_id,
            timing=timing,
            catchup=job.catchup,
            max_missed=job.max_missed,
            timing_since=job.timing_since,
            timing_pending=job.timing_pending,
        )

    def _claim_input(
        self, job: JobRun, slot: datetime, origin: Origin | None, due: datetime | None = None
    ) -> ClaimInput:
        info = workflow.info()
        return ClaimInput(
            job_name=job.job_name,
            scheduled_at=slot,
            due_at=due,
            origin=origin,
            workflow_id=info.workflow_id,
            run_id=info.run_id,
            starting_deadline_seconds=job.starting_deadline_seconds,
            alert_after_seconds=job.alert_after_seconds,
        )

    async def _bookkeeping(self, method: Any, arg: Any) -> Any:
        """A bookkeeping activity (a claim, recording a failure): local."""
        return await workflow.execute_local_activity_method(method, arg, **BOOKKEEPING)

    async def _run_slot(
        self,
        job: JobRun,
        scheduled_at: datetime,
        origin: Origin,
        headline: str,
        claim: ClaimResult | None,
        worked: WorkResult | None = None,
        due: datetime | None = None,
    ) -> SlotRun:
        """Claim one slot (unless the run's begin did), do its work (unless the work
        activity that began the run did), record the outcome. `due`: when a slot a calendar
        moved is due (this run's fire time)."""
        if claim is None:
            claim = await self._bookkeeping(
                ExecutionActivities.claim_execution,
                self._claim_input(job, scheduled_at, origin, due),
            )
        slot = SlotRun(
            scheduled_at=scheduled_at, execution_id=claim.execution_id, outcome="skipped"
        )
        if claim.outcome != "claimed":  # settled: completed or skipped before
            settled = "already_completed" if claim.outcome == "completed" else "skipped"
            return slot.model_copy(update={"outcome": settled, "reason": claim.reason})
        execution = ExecutionRef(
            execution_id=claim.execution_id, job_name=job.job_name, scheduled_at=scheduled_at
        )
        if job.depends_on and workflow.patched(DEPENDS_PATCH):
            waited = await self._wait_for_upstream(job, execution, headline)
            if waited is not None:  # skipped by a dependency's policy, recorded
                return slot.model_copy(update={"outcome": "skipped", "reason": waited})
        try:
            work = (
                worked
                if worked is not None
                else await self._work_or_steps(job, execution, headline)
            )
        except (ActivityError, ChildWorkflowError) as err:
            if superseded(err):  # another workflow run of the same slot took the work over
                return slot.model_copy(update={"outcome": "superseded", "reason": message(err)})
            await self._fail(job, execution, err)
        if work.already_completed:
            reason = "another run completed this slot"
            return slot.model_copy(
                update={"outcome": "already_completed", "counts": work.counts, "reason": reason}
            )
        return slot.model_copy(update={"outcome": "completed", "counts": work.counts})

    async def _wait_for_upstream(
        self, job: JobRun, execution: ExecutionRef, headline: str
    ) -> str | None:
        """Wait until the slot's upstream slots completed (`workflows.dependencies`); the
        reason when a dependency's policy skipped the slot instead."""
        info = workflow.info()
        wait = WaitInput(
            job_name=job.job_name,
            scheduled_at=execution.scheduled_at,
            execution_id=execution.execution_id,
            timing=job.timing,
            zone=job.timing.timezone if job.timing else "UTC",
            depends_on=job.depends_on,
            workflow_id=info.workflow_id,
            run_id=info.run_id,
            began_at=workflow.now(),
        )
        shown = lambda progress: workflow.set_current_details(showing(headline, progress))  # noqa: E731
        result = await self._upstream.wait(wait, shown)
        workflow.set_current_details(showing(headline, result.reason or result.progress))
        return result.reason if result.state == "skip" else None

    async def _work_or_steps(
        self, job: JobRun, execution: ExecutionRef, headline: str
    ) -> WorkResult:
        """The slot's work: the kind's activity (a new attempt series when a frozen worker
        absorbed its retries, `workflows.attempts`), or a workflow kind's steps."""
        if job.workflow:
            return await self._run_steps(job, execution, headline)
        work = WorkInput(execution=execution, params=job.params, timing=job.timing)
        return await with_fresh_series(
            lambda: self._work(job, work, WorkResult),
            execution.execution_id,
            job.retry.maximum_attempts,
        )

    async def _fail(
        self,
        job: JobRun,
        execution: ExecutionRef | None,
        err: ActivityError | ApplicationError | ChildWorkflowError,
        slot: datetime | None = None,
        attempts: int | None = None,
    ) -> NoReturn:
        """End the run on its work's failure: an operator's cancellation stays one; any
        other failure is recorded (what is still running under this run) and fails it.
        Without an execution (no slot of it claimed by this run), `slot` names it."""
        if isinstance(err, ChildWorkflowError) and cancelled(err):
            # An operator cancelled the run: its steps compensated and recorded it.
            raise asyncio.CancelledError(message(err)) from err
        # A workflow job has settled its execution already (compensated or failed);
        # this marks only what is still running under this run.
        await fail_run(
            execution,
            err,
            self._bookkeeping,
            job.job_name,
            slot,
            job.pause_after_failures,
            job.notify,
            attempts,
        )

    async def _work(
        self, job: JobRun, work: WorkInput, result_type: type[WorkResult], local: bool = False
    ) -> Any:
        """The kind's work activity, with the job's timeouts and retries: one slot's work,
        or the run's begin and its first slot's work (`WorkOrBegin`). `local`: as a local
        activity (`LocalTransactionJobWorkflow`), which has no heartbeat: it runs in the
        workflow task, which the SDK keeps alive while it works, and a worker that dies
        in it loses the task to another worker after the task's timeout."""
        if local:
            return await workflow.execute_local_activity(
                job.activity,
                work,
                result_type=result_type,
                start_to_close_timeout=timedelta(seconds=job.start_to_close_seconds),
                retry_policy=job.retry.policy(),
            )
        return await workflow.execute_activity(
            job.activity,
            work,
            result_type=result_type,
            **work_timeouts(job.start_to_close_seconds, job.heartbeat_seconds),
            retry_policy=job.retry.policy(),
        )

    async def _run_steps(self, job: JobRun, execution: ExecutionRef, headline: str) -> WorkResult:
        """Run a workflow kind's steps as a child workflow, named after this run."""
        info = workflow.info()
        return await workflow.execute_child_workflow(
            job.workflow,
            WorkflowJobInput(
                execution=execution,
                run_id=info.run_id,
                params=job.params,
                timing=job.timing,
                options=StepOptions(
                    start_to_close_seconds=job.start_to_close_seconds,
                    heartbeat_seconds=job.heartbeat_seconds,
                    retry=job.retry,
                ),
                headline=headline,
            ),
            id=f"{info.workflow_id}{STEPS_ID_SUFFIX}",
            result_type=WorkResult,
            # Bounded by its parent's bound (`activities.common.lifetime`), and terminated when
            # the parent closes (the default parent-close policy).
            execution_timeout=info.execution_timeout,
        )


def begins_in_work(job: JobRun) -> bool:
    """Whether `job`'s runs begin in their work activity: its kind works a slot in one
    transaction or in chunks (the first in the begin's transaction), and a run has no
    upstream slots to wait for between claim and work."""
    return (job.one_transaction or job.chunked) and not job.workflow and not job.depends_on


def _local_attempts(job: JobRun, err: ActivityError | ApplicationError, local: bool) -> int | None:
    """How many attempts a work activity run as a local activity made before `err`: each
    rolled back its claim, so none could record itself. The SDK raises a local activity's
    own error once its retry policy is spent: one attempt for a non-retryable error, else
    the policy's maximum. None where the count is not known (a timeout, the server path)."""
    if not local or not isinstance(err, ApplicationError) or job.retry.maximum_attempts < 1:
        return None
    return 1 if err.non_retryable else job.retry.maximum_attempts


class JobRunType:
    """What every workflow type of a job's runs shares besides its `run` (which
    `workflow.defn` wants defined on the type itself): the signal an upstream's settlement
    sends. A type sets `_job` in its `__init__`."""

    _job: JobRunWorkflow

    @workflow.signal(name=UPSTREAM_SETTLED_SIGNAL)
    def upstream_settled(self) -> None:
        """An upstream slot this run waits for settled: check again now."""
        self._job.upstream_settled()
