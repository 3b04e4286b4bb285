"""Retries that a frozen worker absorbed are given back: a new attempt series.

The server hands an activity retry to any open poll, a frozen (SIGSTOPped, VM-paused)
worker's included. Each attempt that lands there times out without running, and with a
short heartbeat a frozen worker can use up every retry of the work while a live worker
waits for one. So when the work activity's retries ran out on a timeout, the workflow asks
the database whether the last attempt ever took the slot over (`attempt_took_over`): if
it did not, that attempt never ran, and the workflow schedules the activity again, a new
series of attempts, instead of failing the run. An attempt of an earlier series woken
later can never take the slot back from the new series: take-overs are ordered by
activity and attempt (`activities.claim.executions.Attempt`).

A series whose last attempt did run and timed out is a real failure: the run fails as
before. At most `MAX_SERIES` series run, so work that always hangs before it reaches the
database still ends.

Deterministic: no I/O here, only activities.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, RetryState, TimeoutError

with workflow.unsafe.imports_passed_through():
    from activities.claim.executions import ExecutionActivities
    from activities.common.lifetime import MAX_SERIES
    from activities.common.models import AttemptQuery

T = TypeVar("T")

# Patched in v4. The branch of runs started before it (v3: fail at the end of their
# retries) is gone; the call is deprecated (its marker in runs of v7 workers before this
# release still matches), to be removed in v8 (docs/architecture.md).
ATTEMPT_SERIES_PATCH = "attempt-series-after-silence"

_CHECK_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30)
)


def exhausted_by_timeouts(err: ActivityError) -> bool:
    """The activity's retries ran out, the last one on a timeout (heartbeat, start-to-close)."""
    return (
        isinstance(err.cause, TimeoutError)
        and err.retry_state == RetryState.MAXIMUM_ATTEMPTS_REACHED
    )


async def with_fresh_series(
    start: Callable[[], Awaitable[T]], execution_id: int | None, maximum_attempts: int
) -> T:
    """Await `start()` (one activity); start it again while its retries ran out on
    attempts that never reached the database (see the module). `execution_id` None: the
    activity begins the run and takes the slot over in the one transaction of its work
    (`activities.run.begin.begin_and_work`), so an attempt that timed out committed nothing
    and there is nothing to ask: a new series follows."""
    series = 1
    while True:
        try:
            return await start()
        except ActivityError as err:
            if (
                series >= MAX_SERIES
                or not exhausted_by_timeouts(err)
                or not err.activity_id.isdigit()
            ):
                raise
            workflow.deprecate_patch(ATTEMPT_SERIES_PATCH)
            ran = execution_id is not None and await workflow.execute_local_activity_method(
                ExecutionActivities.attempt_took_over,
                AttemptQuery(
                    execution_id=execution_id,
                    run_id=workflow.info().run_id,
                    activity_seq=int(err.activity_id),
                    attempt=maximum_attempts,
                ),
                start_to_close_timeout=timedelta(seconds=30),
                schedule_to_close_timeout=timedelta(hours=1),
                retry_policy=_CHECK_RETRY,
            )
            if ran:
                raise
            series += 1
            workflow.logger.warning(
                "attempt %d of activity %s timed out without reaching the database; "
                "starting attempt series %d",
                maximum_attempts,
                err.activity_id,
                series,
                extra={"execution_id": execution_id},
            )
