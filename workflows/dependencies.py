"""A slot's wait for its upstream slots, holding no worker slot (docs/dependencies.md).

Used by `ScheduledJobWorkflow` and `RuntimeRunWorkflow` between a slot's claim and its
work. Deterministic: the checks are activities, the waiting is Temporal's.

1. A local activity checks at once (`check_upstream`): the common case, upstreams done
   long ago, costs one marker event and no round trip through the server.
2. While waiting, three things can end the wait, whichever comes first:
   - `await_upstream`, an ordinary activity that fails "not ready" and is retried by the
     server every `POLL` with no end: the guarantee. Between attempts no worker slot is
     held (the server keeps the retry timer), so a worker of one activity slot still runs
     the upstream that releases it;
   - the `upstream_settled` signal, sent by any worker when an upstream slot settles in the
     ledger (`worker.release`): the run checks again at once (prompt release, and the
     progress the Temporal UI shows: "waiting for hourly-sync 03:00-05:00 UTC, 21 of 24
     done");
   - a durable timer at the next deadline: the policy decides there (skip, run, or keep
     waiting, overdue).
3. Cancelling the waiting run (Temporal UI, `temporal workflow cancel`) records its slot
   failed (a backfill runs it again) and ends the run cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.common.dependency_models import WaitInput, WaitResult
    from activities.dependencies.judge import next_deadline
    from activities.dependencies.upstream import CancelInput, UpstreamActivities

from workflows.models import BOOKKEEPING

# Runs started from here on wait for their upstreams; runs started before never did.
# Patched in v6 (issue 23); deprecate_patch in v8, removed in v9 (docs/architecture.md).
DEPENDS_PATCH = "depends-on-upstream"
# How often the server retries the readiness check while no signal comes.
POLL = timedelta(seconds=30)

# A poll gives up after a day (a finite retry policy, `activities.common.lifetime`); the wait then
# checks and polls anew (`_next`), within its run's bound.
_POLL: dict[str, Any] = {
    "start_to_close_timeout": timedelta(seconds=30),
    "schedule_to_close_timeout": timedelta(days=1),
    "retry_policy": RetryPolicy(
        initial_interval=POLL, backoff_coefficient=1.0, maximum_interval=POLL, maximum_attempts=0
    ),
}


class UpstreamWait:
    """The waiting part of a run: `nudge` is its signal handler's, `wait` its body."""

    def __init__(self) -> None:
        self._nudged = False
        self._poll: Any = None

    def nudge(self) -> None:
        """An upstream slot settled: check again now."""
        self._nudged = True

    async def wait(self, wait: WaitInput, show: Callable[[str], None]) -> WaitResult:
        """Wait until the upstreams are ready or the policy decides; `show` words the
        progress for the Temporal UI."""
        result = await self._check(wait)
        try:
            while not result.settled:
                show(result.progress)
                result = await self._next(wait, result)
        except asyncio.CancelledError:
            await self._cancelled(wait)
            raise
        finally:
            if self._poll is not None and not self._poll.done():
                self._poll.cancel()
        return result

    async def _next(self, wait: WaitInput, result: WaitResult) -> WaitResult:
        """Until the poll ends, a signal comes or the next deadline passes; the new state."""
        if self._poll is None or self._poll.done():  # first, or one that gave up: poll anew
            self._poll = workflow.start_activity_method(
                UpstreamActivities.await_upstream, wait, **_POLL
            )
        poll = self._poll
        self._nudged = False
        deadline = next_deadline(wait, result, workflow.now())
        timeout = (deadline - workflow.now()) if deadline is not None else None
        try:
            await workflow.wait_condition(lambda: self._nudged or poll.done(), timeout=timeout)
        except TimeoutError:
            pass  # a deadline passed: the check below applies the policy
        if poll.done() and poll.exception() is None:
            return poll.result()
        return await self._check(wait)

    async def _check(self, wait: WaitInput) -> WaitResult:
        """A check judged at the workflow's clock (the server's), not its worker's."""
        return await workflow.execute_local_activity_method(
            UpstreamActivities.check_upstream,
            wait.model_copy(update={"checked_at": workflow.now()}),
            **BOOKKEEPING,
        )

    async def _cancelled(self, wait: WaitInput) -> None:
        reason = "cancelled while waiting for its upstream slots: backfill the slot to run it"
        await workflow.execute_local_activity_method(
            UpstreamActivities.cancel_wait,
            CancelInput(execution_id=wait.execution_id, run_id=wait.run_id, reason=reason),
            **BOOKKEEPING,
        )
