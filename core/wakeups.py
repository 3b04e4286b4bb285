"""Wake-ups by PostgreSQL LISTEN/NOTIFY for the engine's long-running sessions (issue 43).

A session (a runtime dispatcher, the outbox relay) sleeps until its next due time, read
from its tables, or until a write it cares about commits: migration 0036's triggers
notify `runtime_due` or `outbox_due` at the commit of any statement that writes there.

A notification is a hint, never the truth: the session re-reads its due time after each
one, and at least every `recheck` seconds whatever it heard. A notification lost (the
listening connection dropped and came back) therefore costs precision up to that
re-check, never a slot. While the connection is down, `wait` sleeps the re-check interval
and says it was woken, so the caller looks at the tables again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime, timedelta
from typing import Any

import psycopg
from temporalio import activity

logger = logging.getLogger(__name__)

RUNTIME_DUE = "runtime_due"
OUTBOX_DUE = "outbox_due"
CONNECT_TIMEOUT = 10


class Wakeups:
    """One LISTEN connection on `channel`; use as `async with Wakeups(conninfo, channel)`."""

    def __init__(self, conninfo: str, channel: str, **kwargs: Any) -> None:
        self.conninfo = conninfo
        self.channel = channel
        self.kwargs = {k: v for k, v in kwargs.items() if k not in ("autocommit",)}
        self._conn: psycopg.AsyncConnection | None = None

    async def __aenter__(self) -> Wakeups:
        await self._connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._close()

    async def _connect(self) -> bool:
        try:
            self._conn = await psycopg.AsyncConnection.connect(
                self.conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT, **self.kwargs
            )
            await self._conn.execute(f"LISTEN {self.channel}")  # a constant of this module
        except psycopg.Error as exc:
            logger.warning("LISTEN %s: %s; re-checking on a timer", self.channel, exc)
            await self._close()
            return False
        return True

    async def _close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                await self._conn.close()
        self._conn = None

    async def wait(self, timeout: float) -> bool:
        """Sleep up to `timeout` seconds; True when woken by a notification (or when the
        connection was down: the caller cannot know what it missed)."""
        timeout = max(timeout, 0.0)
        if self._conn is None and not await self._connect():
            await asyncio.sleep(timeout)
            return True
        assert self._conn is not None
        woken = False
        try:
            async for _ in self._conn.notifies(timeout=timeout, stop_after=1):
                woken = True  # the generator ends itself (it holds the connection's lock)
            if woken:
                await self._drain()
        except psycopg.Error as exc:
            logger.warning("LISTEN %s lost: %s; listening again", self.channel, exc)
            await self._close()
            return True
        return woken

    async def wait_in_activity(self, timeout: float) -> bool:
        """`wait`, cut short by the worker's shutdown when inside an activity (the session
        then raises, so that its retry goes on in another worker at once)."""
        if not activity.in_activity():
            return await self.wait(timeout)
        waiting = asyncio.ensure_future(self.wait(timeout))
        shutdown = asyncio.ensure_future(activity.wait_for_worker_shutdown())
        try:
            await asyncio.wait({waiting, shutdown}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (waiting, shutdown):
                if not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task
        if not waiting.done() or waiting.cancelled() or waiting.exception() is not None:
            await self._close()  # cut short mid-wait: listen again on a new connection
            return True
        return waiting.result()

    async def _drain(self) -> None:
        """Take the notifications already queued: one wake-up for all of them."""
        assert self._conn is not None
        # (timeout=0 would mean "no timeout": wait for the next one)
        async for _ in self._conn.notifies(timeout=0.001, stop_after=1000):
            pass


# A session ends this long before its job's next fire time, so the next session starts
# on time (the schedule's overlap policy, BUFFER_ONE, holds the fire until it has ended).
SESSION_MARGIN = timedelta(seconds=2)


def session_end(scheduled_at: datetime, timing: Any, max_seconds: float) -> datetime:
    """When a session that began at its slot `scheduled_at` ends: `max_seconds` after the
    slot, and before the job's next fire time (`timing`, when the run carries it), so
    sessions follow each other without overlapping. The same for every attempt of a run."""
    end = scheduled_at + timedelta(seconds=max_seconds)
    following = timing.next_after(scheduled_at) if timing is not None else None
    if following is not None:
        end = min(end, following - SESSION_MARGIN)
    return end
