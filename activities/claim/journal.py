"""The commit journal: evidence, written with the effects, of who committed what.

Every fenced transaction (`activities.chunks.chunked.fenced`) names its execution and attempt to
PostgreSQL as it begins, so the outbox rows it writes carry them (the defaults of
`outbox_messages.execution_id` and `attempt`), and ends with a `commit_journal` row.
Take-overs are journaled by a trigger on `job_executions`. `python -m schedules audit`
reads it after the fact: an effect committed under an attempt older than one that had
already taken the slot over is a stale write.
"""

from __future__ import annotations

from psycopg import AsyncConnection

from core.sql import queries

_Q = queries("activities.claim", "journal")


async def enter(conn: AsyncConnection, execution_id: int, attempt: int) -> None:
    """In `conn`'s transaction: what it writes to the outbox names this execution and attempt."""
    await conn.execute(_Q["enter"], {"id": execution_id, "attempt": attempt})


async def record(conn: AsyncConnection, execution_id: int, attempt: int, what: str) -> None:
    """In `conn`'s transaction, last: journal what it commits under `attempt`."""
    await conn.execute(_Q["record"], {"id": execution_id, "attempt": attempt, "what": what})
