"""How a run's work failed, read from Temporal's error chain: superseded, cancelled, or not.

Deterministic: it reads only the exceptions the SDK raises into the workflow.

Passed through Temporal's sandbox (`worker.run.PASSTHROUGH`): imported once per worker, not
per workflow run; it holds no state and calls nothing non-deterministic.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
)

with workflow.unsafe.imports_passed_through():
    from activities.models import STALE_ATTEMPT


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
