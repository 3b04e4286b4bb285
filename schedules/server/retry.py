"""The one error and retry policy of every Temporal call this library makes.

Transient errors (a server not ready, overloaded, or out of reach) are worth asking again;
a refusal is not. `Retry` asks again for a bounded time, then raises one
`TemporalUnreachableError` naming the address and the transport's own words. The CLI's
`--wait-for-cluster` is a `Retry` that also waits for a server nothing listens at yet.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from core import redact
from core.errors import TemporalUnreachableError, transport_cause

T = TypeVar("T")

# What a call that was not asked to wait gives an unreachable Temporal, in seconds.
FAIL_FAST_SECONDS = 5.0

# The one attempt of a budget of 0 seconds (`--wait-for-cluster 0`) may take this long.
ZERO_BUDGET_ATTEMPT = 0.5

# Errors that say the server is not (yet) reachable, or too busy to answer now.
TRANSIENT = {
    RPCStatusCode.UNAVAILABLE,
    RPCStatusCode.DEADLINE_EXCEEDED,
    RPCStatusCode.RESOURCE_EXHAUSTED,
    RPCStatusCode.INTERNAL,  # a fresh server's "shard status unknown"
}


def transient_rpc(err: BaseException) -> bool:
    """Whether `err` is a Temporal refusal worth retrying: a server not ready or overloaded,
    not one that refused the request (gRPC's "message larger than max" comes as
    RESOURCE_EXHAUSTED, and is final)."""
    if not isinstance(err, RPCError):
        return False
    return err.status in TRANSIENT and "larger than max" not in (err.message or "")


def transient(exc: BaseException) -> bool:
    """`transient_rpc`, or a transport error (the SDK's "failed client connect")."""
    return transient_rpc(exc) or isinstance(exc, RuntimeError)


def nobody_there(exc: BaseException) -> bool:
    """A connection attempt that nothing at the address accepted, or a name that no DNS
    server knows: waiting a few seconds changes neither."""
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("refused" in text or "lookup address" in text)


class Retry:
    """Run a Temporal call, retrying transient errors for up to `seconds`.

    By default a refused connection (nothing listens at the address) is final at once.
    With `waiting_for_cluster` it is retried too, and `announce(cause)` is told once,
    before the first wait, what is waited for. `address` names the server in the error,
    `setting` the setting it came from (the CLI's says when it was not set). `clock` and
    `sleep` measure and spend the budget (a test passes its own).
    """

    def __init__(
        self,
        seconds: float = FAIL_FAST_SECONDS,
        *,
        waiting_for_cluster: bool = False,
        address: Callable[[], str] | str = "the server",
        announce: Callable[[str], None] | None = None,
        setting: Callable[[], str] = lambda: "(TEMPORAL_ADDRESS)",
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self.seconds = seconds
        self.waiting_for_cluster = waiting_for_cluster
        self._address = address if callable(address) else (lambda: address)
        self._announce_to = announce
        self._setting = setting
        self._announced = False
        self._clock = clock
        self._sleep = sleep

    @classmethod
    def for_client(cls, client: Client, seconds: float = FAIL_FAST_SECONDS) -> Retry:
        """The default of a library call given only a client: fail within `seconds`."""
        return cls(seconds, address=client.service_client.config.target_host)

    def address(self) -> str:
        return redact.scrub(self._address())

    def _retryable(self, exc: BaseException) -> bool:
        if not transient(exc):
            return False
        return self.waiting_for_cluster or not nobody_there(exc)

    def _announce(self, exc: BaseException) -> None:
        if self._announced or not self.waiting_for_cluster or self._announce_to is None:
            return
        self._announced = True
        self._announce_to(f": {transport_cause(exc)}")

    async def __call__(self, call: Callable[[], Awaitable[T]]) -> T:
        return await self.within(lambda _timeout: call())

    async def within(
        self, call: Callable[[float], Awaitable[T]], *, attempt_cap: float | None = None
    ) -> T:
        """`__call__` for a call that takes its own timeout: each attempt is given what is
        left of the budget (at most `attempt_cap`), so none ends past the deadline. No wait
        between attempts runs past it either, and none starts once it has passed: the
        budget is a bound, not a point after which one more attempt may begin."""
        started = self._clock()
        deadline = started + self.seconds
        attempt = 0
        while True:
            attempt += 1
            # A budget of 0 is one attempt, given the time a connection takes.
            left = deadline - self._clock() if self.seconds > 0 else ZERO_BUDGET_ATTEMPT
            timeout = left if attempt_cap is None else min(left, attempt_cap)
            try:
                return await call(timeout)
            except (RPCError, RuntimeError) as exc:
                if not transient(exc):
                    raise
                if not self._retryable(exc):
                    raise self._unreachable(exc, started) from None
                pause = min(_backoff(attempt), deadline - self._clock())
                if pause <= 0:
                    raise self._unreachable(exc, started) from None
                self._announce(exc)
                await self._sleep(pause)
                if self._clock() >= deadline:
                    raise self._unreachable(exc, started) from None

    def _unreachable(self, exc: BaseException, started: float) -> TemporalUnreachableError:
        where = f"cannot reach Temporal at {self.address()}"
        if self._clock() - started >= 1 or self.waiting_for_cluster:
            where += f" within {self.seconds:g}s"
        return TemporalUnreachableError(f"{where}: {transport_cause(exc)} {self._setting()}")


def _backoff(attempt: int) -> float:
    """The wait after the `attempt`-th failure: 0.25 s doubling, at most 5 s."""
    return min(0.25 * 2 ** (attempt - 1), 5.0)
