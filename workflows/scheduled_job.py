"""One run of a scheduled job: claim the slot, do the work, record the outcome.

A Temporal schedule starts this workflow once per fire time, with workflow id
`<job>-<scheduled time>Z`. The workflow is deterministic; every side effect happens in
activities, which make the effect exactly-once per (job, scheduled time).

A run has three steps: *begin* (find its slot, plan the slots it covers, claim the first),
*run the slots* (each claimed, worked and settled, oldest first), *summarise* (the result,
and the details the Temporal UI shows, worded by `workflows.details`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeKey
from temporalio.exceptions import ActivityError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from activities.begin import BeginActivities, BeginInput, origins
    from activities.catchup import CatchupActivities, PlanInput, PlanResult
    from activities.executions import ExecutionActivities
    from activities.models import (
        ClaimInput,
        ClaimResult,
        ExecutionRef,
        Origin,
        WorkInput,
        WorkResult,
        trigger_of,
    )
    from timing import Timing

from workflows.attempts import with_fresh_series
from workflows.details import run_headline, showing, summary
from workflows.failures import cancelled, fail_run, message, superseded
from workflows.models import (
    JobRun,
    JobRunResult,
    SlotRun,
    StepOptions,
    WorkflowJobInput,
)
from workflows.steps import STEPS_ID_SUFFIX

SCHEDULED_START_TIME = SearchAttributeKey.for_datetime("TemporalScheduledStartTime")
SCHEDULED_BY_ID = SearchAttributeKey.for_keyword("TemporalScheduledById")

# Bookkeeping activities retry until the database is back, for up to an hour.
_BOOKKEEPING: dict[str, Any] = {
    "start_to_close_timeout": timedelta(seconds=30),
    "schedule_to_close_timeout": timedelta(hours=1),
    "retry_policy": RetryPolicy(
        initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30)
    ),
}

# Runs started from here on plan and claim in one local activity (`activities.begin`), and
# record failures and claim catch-up slots as local activities too: one activity round trip
# through the server per run instead of three. Runs started before it keep the three.
# Patched in v3; deprecate_patch in v5, removed in v6 (docs/architecture.md).
BEGIN_RUN_PATCH = "begin-run-local"


@dataclass(frozen=True)
class Begun:
    """What the start of a run settled: its own slot, the plan, and the claim `begin_run`
    made with it (of `plan.run[0]`; none on the path of runs before BEGIN_RUN_PATCH)."""

    scheduled_at: datetime
    plan: PlanResult
    claims: dict[datetime, ClaimResult]


@workflow.defn
class ScheduledJobWorkflow:
    def __init__(self) -> None:
        self._local = False  # bookkeeping as local activities (BEGIN_RUN_PATCH)

    @workflow.run
    async def run(self, job: JobRun) -> JobRunResult:
        begun = await self._begin(job)
        plan = begun.plan
        headline = run_headline(job.job_name, begun.scheduled_at, plan.local_time, plan.origin)
        workflow.set_current_details(showing(headline, "running"))
        own, caught_up = await self._run_slots(job, begun, headline)
        workflow.set_current_details(summary(headline, own, caught_up, plan.skipped, plan.gap))
        return JobRunResult(
            **own.model_dump(),  # the run's own slot: time, execution, outcome, counts
            origin=plan.origin,
            trigger=trigger_of(plan.origin),
            job_name=job.job_name,
            caught_up=caught_up,
            missed_skipped=plan.skipped,
            catchup_gap=plan.gap,
        )

    async def _begin(self, job: JobRun) -> Begun:
        """Find the run's slot, plan the slots it covers, claim the first: one local
        activity (`activities.begin`), or the separate activities of older runs."""
        info = workflow.info()
        scheduled_at = info.typed_search_attributes.get(SCHEDULED_START_TIME)
        # Started by hand without a schedule: its own start time is its slot.
        origin: Origin = "scheduled" if scheduled_at is not None else "direct"
        if scheduled_at is None:
            scheduled_at = info.start_time.replace(microsecond=0)
        plan_input = None
        if origin != "direct" and job.timing is not None:
            plan_input = self._plan_input(job, scheduled_at, job.timing)
        if workflow.patched(BEGIN_RUN_PATCH):
            self._local = True
            begin = await workflow.execute_local_activity_method(
                BeginActivities.begin_run,
                BeginInput(
                    plan=plan_input,
                    claim=self._claim_input(job, scheduled_at, origin),
                    server_now=workflow.now(),
                ),
                **_BOOKKEEPING,
            )
            claims = {begin.plan.run[0]: begin.claim} if begin.claim is not None else {}
            return Begun(scheduled_at, begin.plan, claims)
        if plan_input is None:
            plan = PlanResult(run=[scheduled_at], origin=origin)
        else:
            plan = await workflow.execute_activity_method(
                CatchupActivities.plan_run, plan_input, **_BOOKKEEPING
            )
        return Begun(scheduled_at, plan, {})

    async def _run_slots(
        self, job: JobRun, begun: Begun, headline: str
    ) -> tuple[SlotRun, list[SlotRun]]:
        """Run the plan's slots, oldest first: the run's own slot and those it caught up on."""
        own = SlotRun(scheduled_at=begun.scheduled_at, outcome="skipped", reason=begun.plan.reason)
        caught_up = []
        for slot, origin in zip(
            begun.plan.run, origins(begun.plan, begun.scheduled_at), strict=True
        ):
            done = await self._run_slot(job, slot, origin, headline, begun.claims.get(slot))
            if slot == begun.scheduled_at:
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

    def _claim_input(self, job: JobRun, slot: datetime, origin: Origin | None) -> ClaimInput:
        info = workflow.info()
        return ClaimInput(
            job_name=job.job_name,
            scheduled_at=slot,
            origin=origin,
            workflow_id=info.workflow_id,
            run_id=info.run_id,
            starting_deadline_seconds=job.starting_deadline_seconds,
            alert_after_seconds=job.alert_after_seconds,
        )

    async def _bookkeeping(self, method: Any, arg: Any) -> Any:
        """A bookkeeping activity: local under BEGIN_RUN_PATCH, else through the server."""
        run = (
            workflow.execute_local_activity_method
            if self._local
            else workflow.execute_activity_method
        )
        return await run(method, arg, **_BOOKKEEPING)

    async def _run_slot(
        self,
        job: JobRun,
        scheduled_at: datetime,
        origin: Origin,
        headline: str,
        claim: ClaimResult | None,
    ) -> SlotRun:
        """Claim one slot (unless `begin_run` did), do its work, record the outcome."""
        if claim is None:
            claim = await self._bookkeeping(
                ExecutionActivities.claim_execution,
                self._claim_input(job, scheduled_at, origin),
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
        try:
            work = await self._work_or_steps(job, execution, headline)
        except (ActivityError, ChildWorkflowError) as err:
            if superseded(err):  # another workflow run of the same slot took the work over
                return slot.model_copy(update={"outcome": "superseded", "reason": message(err)})
            await self._fail(execution, err)
        if work.already_completed:
            reason = "another run completed this slot"
            return slot.model_copy(
                update={"outcome": "already_completed", "counts": work.counts, "reason": reason}
            )
        return slot.model_copy(update={"outcome": "completed", "counts": work.counts})

    async def _work_or_steps(
        self, job: JobRun, execution: ExecutionRef, headline: str
    ) -> WorkResult:
        """The slot's work: the kind's activity (a new attempt series when a frozen worker
        absorbed its retries, `workflows.attempts`), or a workflow kind's steps."""
        if job.workflow:
            return await self._run_steps(job, execution, headline)
        return await with_fresh_series(
            lambda: self._work(job, execution),
            execution.execution_id,
            job.retry.maximum_attempts,
        )

    async def _fail(
        self, execution: ExecutionRef, err: ActivityError | ChildWorkflowError
    ) -> NoReturn:
        """End the run on its work's failure: an operator's cancellation stays one; any
        other failure is recorded (what is still running under this run) and fails it."""
        if isinstance(err, ChildWorkflowError) and cancelled(err):
            # An operator cancelled the run: its steps compensated and recorded it.
            raise asyncio.CancelledError(message(err)) from err
        # A workflow job has settled its execution already (compensated or failed);
        # this marks only what is still running under this run.
        await fail_run(execution, err, self._bookkeeping)

    async def _work(self, job: JobRun, execution: ExecutionRef) -> WorkResult:
        """The kind's work activity for one slot, with the job's timeouts and retries."""
        return await workflow.execute_activity(
            job.activity,
            WorkInput(execution=execution, params=job.params, timing=job.timing),
            result_type=WorkResult,
            start_to_close_timeout=timedelta(seconds=job.start_to_close_seconds),
            heartbeat_timeout=(
                timedelta(seconds=job.heartbeat_seconds) if job.heartbeat_seconds else None
            ),
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
        )
