"""How a run's work failed, read from Temporal's error chain: superseded, cancelled, or not.

Deterministic: it reads only the exceptions the SDK raises into the workflow.

Passed through Temporal's sandbox (`worker.run.PASSTHROUGH`): imported once per worker, not
per workflow run; it holds no state and calls nothing non-deterministic.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
)

with workflow.unsafe.imports_passed_through():
    from activities.claim.executions import ExecutionActivities
    from activities.common.models import STALE_ATTEMPT, ExecutionRef, FailureInput

# How a workflow runs a bookkeeping activity: (activity method, its input) -> its result.
Bookkeeping = Callable[[Any, Any], Awaitable[Any]]


def cause(exc: BaseException) -> BaseException | None:
    """What an activity or child workflow failed with (None for any other exception)."""
    return exc.cause if isinstance(exc, (ActivityError, ChildWorkflowError)) else None


def superseded(exc: BaseException) -> bool:
    """A stale attempt: another workflow run of the slot took the work over."""
    why = cause(exc)
    return isinstance(why, ApplicationError) and why.type == STALE_ATTEMPT


def cancelled(exc: BaseException) -> bool:
    """The activity or child workflow was cancelled (an operator cancelled the run)."""
    return isinstance(cause(exc), CancelledError)


def message(exc: BaseException) -> str:
    """The failure's own message: its cause's, when it has one."""
    why = cause(exc)
    return str(why) if why is not None else str(exc)


async def fail_run(
    execution: ExecutionRef | None,
    err: BaseException,
    record: Bookkeeping,
    job_name: str = "",
    slot: datetime | None = None,
    pause_after_failures: int | None = None,
    notify: str | None = None,
    attempts: int | None = None,
) -> NoReturn:
    """End a run on its work's failure, visibly: the slot is recorded failed (only if this
    run still holds it) through the workflow's own bookkeeping activity, then the run
    fails for good, naming the slot and the error. Without an execution (a run whose claim
    was never made) nothing is recorded, and `job_name` and `slot` name it."""
    if execution is not None:
        job_name, slot = execution.job_name, execution.scheduled_at
        await record(
            ExecutionActivities.record_failure,
            FailureInput(
                execution_id=execution.execution_id,
                run_id=workflow.info().run_id,
                error=message(err),
                pause_after_failures=pause_after_failures,
                notify=notify,
                attempts=attempts,
            ),
        )
    when = slot.isoformat() if slot is not None else "its slot"
    raise ApplicationError(
        f"{job_name} at {when} failed: {message(err)}", non_retryable=True
    ) from err
