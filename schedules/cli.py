"""Shared plumbing of the `python -m schedules` commands: settings, client, retries."""

from __future__ import annotations

import argparse
import math
from collections.abc import Awaitable, Callable
from typing import TypeVar

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from tenacity import AsyncRetrying, retry_if_exception, stop_after_delay, wait_exponential

from core import redact
from core.errors import TemporalUnreachableError
from worker.client import connect
from worker.settings import Settings, load_settings

T = TypeVar("T")

_TRANSIENT = {
    RPCStatusCode.UNAVAILABLE,
    RPCStatusCode.DEADLINE_EXCEEDED,
    RPCStatusCode.RESOURCE_EXHAUSTED,
    RPCStatusCode.INTERNAL,  # a fresh server's "shard status unknown"
}


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, RPCError):
        # gRPC's "received message larger than max" is RESOURCE_EXHAUSTED, and final.
        return exc.status in _TRANSIENT and "larger than max" not in (exc.message or "")
    return isinstance(exc, RuntimeError)  # the SDK's "failed client connect"


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
    """Settings and a Temporal client, made on first use, with retries for a starting cluster."""

    def __init__(self, wait_seconds: float) -> None:
        self.wait_seconds = wait_seconds
        self._settings: Settings | None = None
        self._client: Client | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings()
        return self._settings

    async def retrying(self, call: Callable[[], Awaitable[T]]) -> T:
        """Run `call`, retrying transient Temporal errors for up to `wait_seconds`."""
        try:
            async for attempt in AsyncRetrying(
                retry=retry_if_exception(_transient),
                stop=stop_after_delay(self.wait_seconds),
                wait=wait_exponential(multiplier=0.25, max=5),
                reraise=True,
            ):
                with attempt:
                    return await call()
        except (RPCError, RuntimeError) as exc:
            if not _transient(exc):
                raise
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise TemporalUnreachableError(
                f"cannot reach Temporal at {self.settings.temporal_address} "
                f"within {self.wait_seconds:g}s: {redact.scrub(first)}"
            ) from None
        raise AssertionError("unreachable")

    async def client(self) -> Client:
        if self._client is None:
            self._client = await self.retrying(lambda: connect(self.settings))
        return self._client


Handler = Callable[[argparse.Namespace, Context], Awaitable[int]]


def register(commands: argparse._SubParsersAction) -> None:
    """Add the operator commands (list, describe, next, trigger, backfill, pause, resume...)."""
    for add in _EXTRA_COMMANDS:
        add(commands)


# Modules with more commands append their `add(commands)` function here.
_EXTRA_COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = []
