"""The steps of a workflow job, on the workflow side: run in order, shown, compensated.

A workflow kind's workflow receives a `WorkflowJobInput` from `ScheduledJobWorkflow`, which
has already planned and claimed the slot, and runs its steps through `JobSteps`:

    async with JobSteps(job, total=3) as steps:
        opened = await steps.run(Activities.open_run, compensate=Activities.reopen_run)
        await steps.run(Activities.charge, inputs=opened.output)
        await steps.run(Activities.send_receipts, inputs=opened.output)
    return steps.result

- Each step is an activity (`activities/steps/record.py`) recorded under the slot's execution: a
  retry, or a replacement worker, resumes at the first unfinished step and never repeats a
  finished one, and the fencing token keeps a stale attempt from committing anything.
- A step that works in batches is called again until it says it is done; in between, the
  run's current details in the Temporal UI say "step 2 of 3: charge, 1,200 of 5,000".
- When a step fails for good, or an operator cancels the run, the compensations of the
  steps that ran (finished, or stopped part-way) run in reverse order, each idempotent and
  recorded as `undo:<step>`, and the execution ends `compensated`, naming what was undone;
  `schedules check` alerts on it. A cancelled step is waited for: it stops at its next
  heartbeat, after finishing what it had sent out.
  A terminated run runs no code at all, so it cannot compensate: cancel a run instead.
- When every step finished, the execution is marked completed.

Deterministic: no I/O here, only activities.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.common.models import WorkResult
    from activities.steps.record import (
        UNDO,
        FinishInput,
        SettleInput,
        StepInput,
        StepResult,
        StepsActivities,
    )

from workflows.attempts import with_fresh_series
from workflows.details import showing, step_progress
from workflows.failures import cancelled, message, superseded
from workflows.models import (
    BOOKKEEPING,
    DATABASE_DEADLINE,
    DATABASE_RETRY,
    STEPS_ID_SUFFIX,
    WorkflowJobInput,
    work_timeouts,
)

__all__ = ["COMPENSATED", "STEPS_ID_SUFFIX", "JobSteps"]

COMPENSATED = "Compensated"
"""The error type a workflow job fails with after compensating."""


# Compensations retry as bookkeeping does, until the database is back, for up to an hour:
# a compensation that gave up would leave a half-done run.


@dataclass
class Compensation:
    """A step's compensation, remembered when the step starts; `inputs` grow by the step's
    output once it is done (what the compensation needs to undo it)."""

    step: str
    activity: str  # the compensation's activity type
    inputs: dict[str, Any]


class Compensations:
    """The compensations of the steps that ran, a stack: pushed in step order, run newest
    first."""

    def __init__(self) -> None:
        self._stack: list[Compensation] = []

    def push(self, step: str, activity: str, inputs: dict[str, Any]) -> Compensation:
        entry = Compensation(step, activity, inputs)
        self._stack.append(entry)
        return entry

    def __bool__(self) -> bool:
        return bool(self._stack)

    def newest_first(self) -> Iterator[Compensation]:
        return reversed(self._stack)


class JobSteps:
    """Runs a workflow job's steps in order; an async context manager (see the module)."""

    def __init__(self, job: WorkflowJobInput, total: int) -> None:
        self.job = job
        self.total = total
        self.done: list[str] = []
        self.counts: dict[str, int] = {}
        self._undo = Compensations()
        self._show("starting")

    async def __aenter__(self) -> JobSteps:
        return self

    async def run(
        self,
        step: Callable[..., Any],
        *,
        compensate: Callable[..., Any] | None = None,
        inputs: dict[str, Any] | None = None,
    ) -> StepResult:
        """Run `step` (an owner method the kind registers) until it is done; remember its
        compensation, to run if a later step fails for good."""
        name = step.__name__
        number = len(self.done) + 1
        call = StepInput(
            execution=self.job.execution,
            run_id=self.job.run_id,
            step=name,
            params=self.job.params,
            timing=self.job.timing,
            inputs=inputs or {},
        )
        self._show(step_progress(number, self.total, name, None, None))
        undo = None
        if compensate is not None:
            # Remembered before the step runs: a step that fails part-way through (or is
            # cancelled) is undone too, so a compensation must be safe for a step that did
            # some of its work or none.
            undo = self._undo.push(name, compensate.__name__, call.inputs)
        options = self.job.options
        while True:
            result = await with_fresh_series(
                lambda: self._step_activity(name, call),
                self.job.execution.execution_id,
                options.retry.maximum_attempts,
            )
            self._show(
                step_progress(number, self.total, name, result.items_done, result.items_total)
            )
            if workflow.cancellation_reason() is not None:
                # The run was cancelled while this call finished its work: stop here.
                raise asyncio.CancelledError("the run was cancelled")
            if result.done:
                break
        for key, value in result.counts.items():
            self.counts[f"{name}.{key}"] = value
        self.done.append(name)
        if undo is not None:
            undo.inputs = call.inputs | result.output
        return result

    async def _step_activity(self, name: str, call: StepInput) -> StepResult:
        """One call of a step: an activity with the job's timeouts and retries."""
        options = self.job.options
        return await workflow.execute_activity(
            name,
            call,
            result_type=StepResult,
            # A cancelled run waits for the step to stop: what it sent out is recorded
            # before any compensation looks.
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            **work_timeouts(options.start_to_close_seconds, options.heartbeat_seconds),
            retry_policy=options.retry.policy(),
        )

    @property
    def result(self) -> WorkResult:
        """What the run did: each step's counts, as `<step>.<count>`."""
        return WorkResult(counts=self.counts)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        if exc is None:
            await workflow.execute_activity_method(
                StepsActivities.finish_steps,
                FinishInput(
                    execution=self.job.execution,
                    run_id=self.job.run_id,
                    counts=self.counts,
                    steps=self.done,
                ),
                **BOOKKEEPING,
            )
            self._show(f"completed: {len(self.done)} of {self.total} steps")
            return False
        if superseded(exc):
            return False  # another run of the slot holds it now: it goes on from here
        was_cancelled = isinstance(exc, asyncio.CancelledError) or cancelled(exc)
        why = "the run was cancelled" if was_cancelled else message(exc)
        failed_step = f"step {len(self.done) + 1} of {self.total}"
        if not self._undo:  # nothing with effects to undo: a plain failure
            await self._settle("failed", f"{failed_step} did not finish: {why}", [])
            return False
        undone = await self._compensate(f"{failed_step} failed for good: {why}")
        summary = f"{failed_step} did not finish ({why}); compensated {', '.join(undone)}"
        await self._settle("compensated", summary, undone)
        self._show(summary)
        if was_cancelled:
            return False  # stays cancelled, as the operator asked
        raise ApplicationError(summary, type=COMPENSATED, non_retryable=True) from exc

    async def _compensate(self, reason: str) -> list[str]:
        """Run the compensations of the completed steps, newest first; what was undone."""
        undone = []
        for undo in self._undo.newest_first():
            step = undo.step
            self._show(f"compensating {step}: {reason}")
            try:
                await workflow.execute_activity(
                    undo.activity,
                    StepInput(
                        execution=self.job.execution,
                        run_id=self.job.run_id,
                        step=f"{UNDO}{step}",
                        params=self.job.params,
                        timing=self.job.timing,
                        inputs=undo.inputs,
                    ),
                    result_type=StepResult,
                    **work_timeouts(
                        self.job.options.start_to_close_seconds, self.job.options.heartbeat_seconds
                    ),
                    schedule_to_close_timeout=DATABASE_DEADLINE,
                    retry_policy=DATABASE_RETRY,
                )
            except ActivityError as err:
                if superseded(err):
                    raise
                failure = f"compensating {step} failed: {message(err)}"
                await self._settle("failed", f"{reason}; {failure}", undone)
                raise ApplicationError(failure, non_retryable=True) from err
            undone.append(step)
        return undone

    async def _settle(self, status: str, error: str, undone: list[str]) -> None:
        await workflow.execute_activity_method(
            StepsActivities.settle_steps,
            SettleInput(
                execution=self.job.execution,
                run_id=self.job.run_id,
                status=status,
                error=error,
                compensated=undone,
                counts=self.counts,
            ),
            **BOOKKEEPING,
        )

    def _show(self, state: str) -> None:
        headline = self.job.headline or f"**{self.job.execution.job_name}**"
        workflow.set_current_details(showing(headline, state))
