"""Runs of runtime schedules (issue 21): one slot, or a batch of light slots.

The dispatcher (`activities.runtime.dispatch`) starts `RuntimeRunWorkflow` once per (schedule,
slot), with the workflow id `rt-<id>-<slot>Z`, and `RuntimeBatchWorkflow` once per batch of
slots of a kind that runs in batches. Both are deterministic; the claim, the fencing token
and the work happen in activities, exactly as a catalog job's (`ScheduledJobWorkflow`):

- *begin*: a local activity reads the schedule and claims the slot's ledger row;
- *work*: the kind's activity, under the fencing token, a new attempt series when a
  frozen worker absorbed its retries (`workflows.attempts`);
- *settle*: a failure is recorded and fails the run, visibly; a stale attempt (another run
  of the slot took it over) ends it `superseded`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.common.dependency_models import UPSTREAM_SETTLED_SIGNAL, WaitInput
    from activities.common.lifetime import BATCH_CALL, RUNTIME_RETRY_INTERVAL
    from activities.common.models import ExecutionRef, WorkInput, WorkResult
    from activities.runtime.models import (
        BatchInput,
        BatchResult,
        BatchRun,
        RuntimeBegin,
        RuntimeBegun,
        RuntimeRun,
        RuntimeRunResult,
        RuntimeWork,
    )
    from activities.runtime.runs import RuntimeActivities

from workflows.attempts import with_fresh_series
from workflows.dependencies import DEPENDS_PATCH, UpstreamWait
from workflows.failures import fail_run, message, superseded
from workflows.models import BOOKKEEPING, work_timeouts

_WORK_RETRY = {"initial_interval": timedelta(seconds=1), "maximum_interval": RUNTIME_RETRY_INTERVAL}


@workflow.defn
class RuntimeRunWorkflow:
    """One slot of one runtime schedule: begin (claim), wait for upstreams, work, settle."""

    def __init__(self) -> None:
        self._upstream = UpstreamWait()  # the slot's wait for its upstream slots

    @workflow.signal(name=UPSTREAM_SETTLED_SIGNAL)
    def upstream_settled(self) -> None:
        """An upstream slot this run waits for settled: check again now."""
        self._upstream.nudge()

    @workflow.run
    async def run(self, run: RuntimeRun) -> RuntimeRunResult:
        begun = await self._begin(run)
        done = RuntimeRunResult(
            schedule_id=run.schedule_id,
            scheduled_at=run.scheduled_at,
            execution_id=begun.execution_id,
            outcome="skipped",
            reason=begun.reason,
        )
        if begun.work is None or begun.execution_id is None:
            settled = "already_completed" if begun.outcome == "completed" else "skipped"
            return done.model_copy(update={"outcome": settled})
        execution = ExecutionRef(
            execution_id=begun.execution_id,
            job_name=begun.job_name,
            scheduled_at=run.scheduled_at,
        )
        if begun.work.depends_on and workflow.patched(DEPENDS_PATCH):
            skipped = await self._wait_for_upstream(execution, begun.work)
            if skipped is not None:  # a dependency's policy skipped the slot, recorded
                return done.model_copy(update={"outcome": "skipped", "reason": skipped})
        try:
            work = await with_fresh_series(
                lambda: self._work(execution, begun.work),
                execution.execution_id,
                begun.work.maximum_attempts,
            )
        except ActivityError as err:
            if superseded(err):
                return done.model_copy(update={"outcome": "superseded", "reason": message(err)})
            await fail_run(execution, err, self._bookkeeping)
        outcome = "already_completed" if work.already_completed else "completed"
        return done.model_copy(update={"outcome": outcome, "counts": work.counts})

    async def _wait_for_upstream(self, execution: ExecutionRef, work: RuntimeWork) -> str | None:
        """Wait until the slot's upstream slots completed (`workflows.dependencies`); the
        reason when a dependency's policy skipped the slot instead."""
        info = workflow.info()
        timing = work.timing
        wait = WaitInput(
            job_name=execution.job_name,
            scheduled_at=execution.scheduled_at,
            execution_id=execution.execution_id,
            timing=timing,
            zone=timing.timezone if timing else "UTC",
            depends_on=work.depends_on,
            tenant=work.tenant,
            workflow_id=info.workflow_id,
            run_id=info.run_id,
            began_at=workflow.now(),
        )
        result = await self._upstream.wait(wait, workflow.set_current_details)
        workflow.set_current_details(result.reason or result.progress)
        return result.reason if result.state == "skip" else None

    async def _begin(self, run: RuntimeRun) -> RuntimeBegun:
        info = workflow.info()
        begin = RuntimeBegin(
            run=run, workflow_id=info.workflow_id, run_id=info.run_id, server_now=workflow.now()
        )
        return await self._bookkeeping(RuntimeActivities.begin_runtime_run, begin)

    async def _work(self, execution: ExecutionRef, work: RuntimeWork) -> WorkResult:
        """The kind's work activity for the slot, with the kind's timeouts and retries."""
        return await workflow.execute_activity(
            work.activity,
            WorkInput(
                execution=execution,
                params=work.params,
                timing=work.timing,
            ),
            result_type=WorkResult,
            **work_timeouts(work.start_to_close_seconds, work.heartbeat_seconds),
            retry_policy=RetryPolicy(maximum_attempts=work.maximum_attempts, **_WORK_RETRY),
        )

    @staticmethod
    async def _bookkeeping(method: Any, arg: Any) -> Any:
        """A bookkeeping activity (the begin, recording a failure): local, retried until
        the database is back."""
        return await workflow.execute_local_activity_method(method, arg, **BOOKKEEPING)


@workflow.defn
class RuntimeBatchWorkflow:
    """Many light slots of one kind: each activity call works the next slots in one
    transaction, each slot under its own ledger row and fencing token."""

    @workflow.run
    async def run(self, batch: BatchRun) -> BatchResult:
        total = BatchResult(handled=0)
        while True:
            part = await workflow.execute_activity_method(
                RuntimeActivities.run_runtime_batch,
                BatchInput(batch_id=batch.batch_id, after=total.handled),
                start_to_close_timeout=timedelta(minutes=10),
                heartbeat_timeout=timedelta(seconds=30),
                # Retried until the database is back, for up to a day: then the batch
                # fails and the dispatcher starts it again (`activities.runtime.start`).
                schedule_to_close_timeout=BATCH_CALL,
                retry_policy=RetryPolicy(**_WORK_RETRY),
            )
            total = BatchResult(
                handled=part.handled,
                completed=total.completed + part.completed,
                already=total.already + part.already,
                skipped=total.skipped + part.skipped,
                failed=total.failed + part.failed,
                done=part.done,
            )
            workflow.set_current_details(
                f"{total.handled} slots: {total.completed} completed, {total.already} "
                f"settled before, {total.skipped} skipped, {total.failed} failed"
            )
            if part.done:
                return total
