"""Heartbeat while waiting for a lock, so a frozen holder never costs an attempt.

A new attempt takes an execution over by locking its row. If the previous attempt froze
inside a fenced transaction (a paused process, a VM stopped mid-chunk), PostgreSQL keeps
that row locked until `DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS` ends the frozen session.
A statement waiting on the lock sends no heartbeat: with a heartbeat timeout shorter than
the idle timeout, Temporal would time the new attempt out too, and the next, until the
retries were used up by one frozen worker. `heartbeating` keeps the attempt alive while it
waits; the wait itself stays in PostgreSQL's lock queue, in order, and ends the moment the
lock is free.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any, TypeVar

from temporalio import activity

T = TypeVar("T")


async def heartbeating(awaitable: Awaitable[T], details: object = None) -> T:
    """Await `awaitable`, heartbeating (with `details`) every third of the activity's
    heartbeat timeout until it is done. Outside an activity, or without a heartbeat
    timeout, it is simply awaited."""
    timeout = activity.info().heartbeat_timeout if activity.in_activity() else None
    if not timeout:
        return await awaitable
    every = max(timeout.total_seconds() / 3, 0.05)
    task = asyncio.ensure_future(awaitable)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=every)
            if done:
                return task.result()
            if details is None:
                activity.heartbeat()
            else:
                activity.heartbeat(details)
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def activity_heartbeat(*details: Any) -> None:
    """Heartbeat when inside an activity (a tick called by a test is not)."""
    if activity.in_activity():
        activity.heartbeat(*details)
