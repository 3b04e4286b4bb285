"""Shared plumbing of the `python -m schedules` commands: settings, client, retries."""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from temporalio.client import Client
from temporalio.service import RPCError
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_delay,
    wait_exponential,
)

from core import redact
from core.errors import CatalogError, TemporalUnreachableError
from schedules.catalog.model import JobSpec, load_valid_jobs
from schedules.server.errors import nobody_there, transient, transport_cause
from worker.client import connect
from worker.settings import Settings, load_settings

T = TypeVar("T")

# What a command that was not asked to wait gives an unreachable Temporal, in seconds.
FAIL_FAST_SECONDS = 5.0
# One connection attempt while waiting for a starting cluster.
_ATTEMPT_SECONDS = 10.0


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line: `error: PROG: what (see --help)`,
    exit 2. Its subcommands' parsers are of this class too."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"error: {self.prog}: {message} (see {self.prog} --help)\n")


def _seconds(text: str, allow_zero: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero) or value > 86400:
        span = "from 0 to 86400" if allow_zero else "above 0, at most 86400"
        raise argparse.ArgumentTypeError(f"must be a number of seconds {span}, got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds, more than 0, at most a day."""
    return _seconds(text, allow_zero=False)


def non_negative_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds from 0 to a day."""
    return _seconds(text, allow_zero=True)


class Context:
    """Settings and a Temporal client, made on first use, with retries for a starting cluster.

    By default a command fails fast: transient Temporal errors are retried for
    `wait_seconds` (5), no connection attempt outlasts what is left of them, and a
    refused connection (nothing listens at the address) is final at once. With
    `waiting_for_cluster` (a write given `--wait-for-cluster SECONDS`) a refused connection
    is retried too, for `wait_seconds`, and stderr says once what it waits for.
    """

    def __init__(
        self, wait_seconds: float = FAIL_FAST_SECONDS, *, waiting_for_cluster: bool = False
    ) -> None:
        self.wait_seconds = wait_seconds
        self.waiting_for_cluster = waiting_for_cluster
        self._settings: Settings | None = None
        self._client: Client | None = None
        self._connecting = asyncio.Lock()  # one connection for every concurrent caller
        self._announced = False

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings()
        return self._settings

    def _address(self) -> str:
        return redact.scrub(self.settings.temporal_address)

    def _retryable(self, exc: BaseException) -> bool:
        if not transient(exc):
            return False
        return self.waiting_for_cluster or not nobody_there(exc)

    def _announce(self, state: RetryCallState) -> None:
        if self._announced or not self.waiting_for_cluster:
            return
        self._announced = True
        exc = state.outcome.exception() if state.outcome else None
        cause = f": {transport_cause(exc)}" if exc is not None else ""
        print(
            f"waiting up to {self.wait_seconds:g}s (--wait-for-cluster) for Temporal at "
            f"{self._address()} to answer{cause}",
            file=sys.stderr,
            flush=True,
        )

    async def retrying(self, call: Callable[[], Awaitable[T]]) -> T:
        """Run `call`, retrying transient Temporal errors for up to `wait_seconds`."""
        started = time.monotonic()
        try:
            async for attempt in AsyncRetrying(
                retry=retry_if_exception(self._retryable),
                stop=stop_after_delay(self.wait_seconds),
                wait=wait_exponential(multiplier=0.25, max=5),
                before_sleep=self._announce,
                reraise=True,
            ):
                with attempt:
                    return await call()
        except (RPCError, RuntimeError) as exc:
            if not transient(exc):
                raise
            where = f"cannot reach Temporal at {self._address()}"
            if time.monotonic() - started >= 1 or self.waiting_for_cluster:
                where += f" within {self.wait_seconds:g}s"
            raise TemporalUnreachableError(
                f"{where}: {transport_cause(exc)} (TEMPORAL_ADDRESS)"
            ) from None
        raise AssertionError("unreachable")

    async def _connect(self, deadline: float) -> Client:
        # No attempt may outlast the budget (an address that never answers).
        limit = max(deadline - time.monotonic(), 0.5)
        if self.waiting_for_cluster:
            limit = min(limit, _ATTEMPT_SECONDS)
        try:
            return await asyncio.wait_for(connect(self.settings), timeout=limit)
        except TimeoutError:
            raise RuntimeError(f"no answer within {limit:g}s") from None

    async def client(self) -> Client:
        async with self._connecting:
            if self._client is None:
                deadline = time.monotonic() + self.wait_seconds
                self._client = await self.retrying(lambda: self._connect(deadline))
        return self._client


Handler = Callable[[argparse.Namespace, Context], Awaitable[int]]

CLUSTER_WAIT_HELP = (
    "if Temporal is unreachable or still starting, keep trying for up to this long, saying "
    "so on stderr (default: fail within about 5s); may come before or after the command"
)


def add_cluster_wait(parser: argparse.ArgumentParser) -> None:
    """Give a command that writes `--wait-for-cluster SECONDS` (read-only ones fail fast)."""
    parser.add_argument(
        "--wait-for-cluster",
        dest="cluster_wait",
        type=non_negative_seconds,
        default=argparse.SUPPRESS,  # keep a value given before the command
        metavar="SECONDS",
        help=CLUSTER_WAIT_HELP,
    )
    parser.set_defaults(waits_for_cluster=True)


def register(commands: argparse._SubParsersAction) -> None:
    """Add the operator commands (list, describe, next, trigger, backfill, pause, resume...)."""
    for add in _EXTRA_COMMANDS:
        add(commands)


# Modules with more commands append their `add(commands)` function here.
_EXTRA_COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = []


def catalog_jobs(path: Path | None, job_id: str | None = None) -> dict[str, JobSpec]:
    """The catalog's valid jobs by id, for a command that reads the record or acts on one
    job: an invalid entry is left out with one warning line on stderr, unless it is
    `job_id`, the job asked for, whose first problem is the error. `sync` and `validate`
    refuse the whole catalog instead (`load_catalog`)."""
    jobs, broken = load_valid_jobs(path)
    if job_id in broken:
        more = len(broken[job_id]) - 1
        raise CatalogError(
            f"{broken[job_id][0]}"
            + (f" (and {more} more problem(s))" if more else "")
            + "; `python -m schedules validate` lists every problem"
        )
    if broken:
        names = ", ".join(repr(name) for name in broken)
        print(
            f"warning: {len(broken)} invalid catalog entr{'y' if len(broken) == 1 else 'ies'} "
            f"left out ({names}); `python -m schedules validate` lists the problems",
            file=sys.stderr,
        )
    return {job.id: job for job in jobs}
