"""A test-only pause point between the chunks of chunked work (`run_in_chunks`).

It gates the chunks of the work activity, not a run's first chunk, which the transaction
that begins the run does (`activities.run.begin.begin_and_work`): a run that the gate holds has
claimed its slot and committed that chunk, and its work activity has taken the slot over.

Fault tests must signal a worker while its run is still working, at a point they choose,
not at one they hope for. With `WORKER_TEST_CHUNK_GATE=<key>` (read once by the worker at
start-up), every attempt waits before each chunk while another PostgreSQL session holds
the advisory lock `key` exclusively: the test's, which it takes and releases to close and
open the gate. Waiting, the attempt heartbeats as a slow chunk would, so it stays alive
until the test acts; it holds no row lock then (the chunks' fenced transactions are
committed), so its takeover by another attempt is never blocked by it. Unset, the default
and always in production, `pass_chunk_gate` returns at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

from psycopg_pool import AsyncConnectionPool
from temporalio import activity

from core.sql import queries

_Q = queries("activities.chunks", "chunk_gate")
_HEARTBEAT_SECONDS = 1.0  # while waiting; well inside any heartbeat timeout a test sets
_key: int | None = None


def set_chunk_gate(key: int | None) -> None:
    """Gate every chunk of this process on advisory lock `key` (None: no gate)."""
    global _key
    _key = key


async def pass_chunk_gate(pool: AsyncConnectionPool, progress: Any) -> None:
    """Return once no other session holds the gate's lock exclusively (at once if unset)."""
    if _key is None:
        return
    key = _key

    async def wait() -> None:
        # Shared and for this transaction only: attempts pass side by side and hold
        # nothing once through. While closed, the wait is one lock request in the queue,
        # so a test that releases and retakes the lock lets exactly this chunk through.
        async with pool.connection() as conn, conn.transaction():
            await conn.execute(_Q["pass"], {"key": key})

    waiting = asyncio.ensure_future(wait())
    try:
        while not (await asyncio.wait({waiting}, timeout=_HEARTBEAT_SECONDS))[0]:
            activity.heartbeat(progress)
        waiting.result()
    finally:
        waiting.cancel()
