"""One run of a scheduled job: claim the slot, do the work, record the outcome.

A Temporal schedule starts this workflow once per fire time, with workflow id
`<job>-<scheduled time>Z`. The workflow is deterministic; every side effect happens in
activities, which make the effect exactly-once per (job, scheduled time).
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any, Literal

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeKey
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
)

with workflow.unsafe.imports_passed_through():
    from activities.begin import BeginActivities, BeginInput, origins
    from activities.catchup import CatchupActivities, PlanInput, PlanResult
    from activities.executions import ExecutionActivities
    from activities.models import (
        STALE_ATTEMPT,
        ClaimInput,
        ClaimResult,
        ExecutionRef,
        FailureInput,
        Origin,
        WorkInput,
        WorkResult,
    )

from workflows.attempts import with_fresh_series
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
_BOOKKEEPING_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30)
)
_BOOKKEEPING_TIMEOUT = timedelta(seconds=30)
_BOOKKEEPING_DEADLINE = timedelta(hours=1)

# Runs started from here on plan and claim in one local activity (`activities.begin`), and
# record failures and claim catch-up slots as local activities too: one activity round trip
# through the server per run instead of three. Runs started before it keep the three.
BEGIN_RUN_PATCH = "begin-run-local"


@workflow.defn
class ScheduledJobWorkflow:
    def __init__(self) -> None:
        self._local = False  # bookkeeping as local activities (BEGIN_RUN_PATCH)

    @workflow.run
    async def run(self, job: JobRun) -> JobRunResult:
        info = workflow.info()
        scheduled_at = info.typed_search_attributes.get(SCHEDULED_START_TIME)
        trigger: Literal["schedule", "direct"] = "schedule"
        if scheduled_at is None:
            # Started by hand without a schedule: its own start time is its slot.
            scheduled_at = info.start_time.replace(microsecond=0)
            trigger = "direct"
        plan_input = None
        if trigger == "schedule" and job.timing is not None:
            plan_input = PlanInput(
                job_name=job.job_name,
                scheduled_at=scheduled_at,
                started_at=info.start_time,
                workflow_id=info.workflow_id,
                run_id=info.run_id,
                timing=job.timing,
                catchup=job.catchup,
                max_missed=job.max_missed,
                timing_since=job.timing_since,
                timing_pending=job.timing_pending,
            )

        claims: dict[datetime, ClaimResult] = {}
        if workflow.patched(BEGIN_RUN_PATCH):
            self._local = True
            begin = await workflow.execute_local_activity_method(
                BeginActivities.begin_run,
                BeginInput(
                    plan=plan_input,
                    claim=self._claim_input(
                        job, scheduled_at, "direct" if trigger == "direct" else None
                    ),
                    server_now=workflow.now(),
                ),
                start_to_close_timeout=_BOOKKEEPING_TIMEOUT,
                schedule_to_close_timeout=_BOOKKEEPING_DEADLINE,
                retry_policy=_BOOKKEEPING_RETRY,
            )
            plan = begin.plan
            if begin.claim is not None:
                claims[plan.run[0]] = begin.claim
        elif plan_input is not None:
            plan = await workflow.execute_activity_method(
                CatchupActivities.plan_run,
                plan_input,
                start_to_close_timeout=_BOOKKEEPING_TIMEOUT,
                schedule_to_close_timeout=_BOOKKEEPING_DEADLINE,
                retry_policy=_BOOKKEEPING_RETRY,
            )
        else:
            plan = PlanResult(
                run=[scheduled_at], origin="direct" if trigger == "direct" else "scheduled"
            )

        origin = "direct" if trigger == "direct" else plan.origin
        when = plan.local_time or f"{scheduled_at:%Y-%m-%d %H:%M} UTC"
        headline = f"**{job.job_name}** · {when} · {origin}"
        workflow.set_current_details(f"{headline}\n\nrunning")

        own = SlotRun(scheduled_at=scheduled_at, outcome="skipped", reason=plan.reason)
        caught_up = []
        for slot, slot_origin in zip(plan.run, origins(plan, scheduled_at), strict=True):
            done = await self._run_slot(job, slot, slot_origin, headline, claims.get(slot))
            if slot == scheduled_at:
                own = done
            else:
                caught_up.append(done)
        counts = ", ".join(f"{k} {v}" for k, v in own.counts.items()) or "no counts"
        lines = [headline, "", f"{own.outcome}: {counts}"]
        if own.reason:
            lines.append(own.reason)
        if caught_up or plan.skipped:
            lines.append(
                f"caught up {len(caught_up)} missed run(s); {plan.skipped} recorded skipped"
                + (f" ({plan.gap} beyond the catch-up cap)" if plan.gap else "")
            )
        workflow.set_current_details("\n".join(lines))
        return JobRunResult(
            **own.model_dump(),  # the run's own slot: time, execution, outcome, counts
            origin=origin,
            job_name=job.job_name,
            trigger=trigger,
            caught_up=caught_up,
            missed_skipped=plan.skipped,
            catchup_gap=plan.gap,
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
        return await run(
            method,
            arg,
            start_to_close_timeout=_BOOKKEEPING_TIMEOUT,
            schedule_to_close_timeout=_BOOKKEEPING_DEADLINE,
            retry_policy=_BOOKKEEPING_RETRY,
        )

    async def _run_slot(
        self,
        job: JobRun,
        scheduled_at: datetime,
        origin: Origin,
        headline: str = "",
        claim: ClaimResult | None = None,
    ) -> SlotRun:
        """Claim one slot (unless `begin_run` did), do its work, record the outcome."""
        info = workflow.info()
        if claim is None:
            claim = await self._bookkeeping(
                ExecutionActivities.claim_execution,
                self._claim_input(job, scheduled_at, origin),
            )

        def result(outcome: Any, counts: dict[str, int] | None = None, reason: str | None = None):
            return SlotRun(
                scheduled_at=scheduled_at,
                execution_id=claim.execution_id,
                outcome=outcome,
                counts=counts or {},
                reason=reason,
            )

        if claim.outcome == "completed":
            return result("already_completed", reason=claim.reason)
        if claim.outcome == "skipped":
            return result("skipped", reason=claim.reason)

        execution = ExecutionRef(
            execution_id=claim.execution_id, job_name=job.job_name, scheduled_at=scheduled_at
        )
        try:
            if job.workflow:
                work = await self._run_steps(job, execution, headline)
            else:
                work = await with_fresh_series(
                    lambda: self._work(job, execution),
                    claim.execution_id,
                    job.retry.maximum_attempts,
                )
        except (ActivityError, ChildWorkflowError) as err:
            cause = err.cause
            if isinstance(cause, ApplicationError) and cause.type == STALE_ATTEMPT:
                # Another workflow run of the same slot took the work over.
                return result("superseded", reason=str(cause))
            if isinstance(err, ChildWorkflowError) and isinstance(cause, CancelledError):
                # An operator cancelled the run: its steps compensated and recorded it.
                raise asyncio.CancelledError(str(cause)) from err
            message = str(cause) if cause is not None else str(err)
            # A workflow job has settled its execution already (compensated or failed);
            # this marks only what is still running under this run.
            await self._bookkeeping(
                ExecutionActivities.record_failure,
                FailureInput(execution_id=claim.execution_id, run_id=info.run_id, error=message),
            )
            raise ApplicationError(
                f"{job.job_name} at {scheduled_at.isoformat()} failed: {message}",
                non_retryable=True,
            ) from err

        if work.already_completed:
            return result("already_completed", work.counts, "another run completed this slot")
        return result("completed", work.counts)

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
