"""What the operator commands read from PostgreSQL: a job's executions (`job_executions`).

Each read takes a connection string, opens one short autocommit connection, and names the
setting in its error (`DATABASE_URL`) without ever holding the URL's password.
The named queries are `schedules/sql/operate.sql`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row

from core import redact
from core.errors import first_line, setting_hint
from core.sql import queries as named_queries
from schedules.server.state import OperationError
from timing import TICK


class DatabaseUnavailableError(OperationError):
    """PostgreSQL could not be read; the message never holds the connection URL."""


def queries() -> dict[str, str]:
    """The named queries of `schedules/sql/operate.sql`."""
    return named_queries("schedules.sql", "operate")


def database_hint() -> str:
    """Which setting a PostgreSQL error is about: `DATABASE_URL`, or, when it is not set,
    that the local stack's default was tried (a newcomer outside `make run`)."""
    return setting_hint("DATABASE_URL")


def _redacted(exc: Exception, url: str) -> str:
    """The first line of a psycopg error, with the URL's password (if any) masked."""
    text = first_line(exc)
    try:
        password = conninfo_to_dict(url).get("password")
    except psycopg.Error:
        password = None
    return redact.scrub(text.replace(str(password), "***") if password else text)


def unavailable(exc: psycopg.Error, url: str, what: str = "") -> DatabaseUnavailableError:
    """The error to raise for `exc` from PostgreSQL at `url`: one line, password masked,
    naming the setting; `what` says what was left undone."""
    return DatabaseUnavailableError(
        f"PostgreSQL is unavailable: {_redacted(exc, url)} {database_hint()}{what}"
    )


async def _fetch(url: str, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    try:
        async with await psycopg.AsyncConnection.connect(
            url, connect_timeout=5, autocommit=True, row_factory=dict_row
        ) as conn:
            cur = await conn.execute(queries()[name], params)
            return await cur.fetchall()
    except psycopg.Error as exc:
        raise unavailable(exc, url) from None


async def last_runs(url: str, job_ids: list[str]) -> dict[str, dict[str, Any]]:
    """The newest `job_executions` row of each job that has one, by job id."""
    rows = await _fetch(url, "last_runs", {"jobs": job_ids})
    return {row["job_name"]: row for row in rows}


async def recent_executions(url: str, job_id: str, limit: int = 10) -> list[dict[str, Any]]:
    """The newest `limit` `job_executions` rows of `job_id`, newest first."""
    return await _fetch(url, "recent_executions", {"job": job_id, "limit": limit})


async def execution_counts(url: str, job_id: str) -> dict[str, Any]:
    """How many of `job_id`'s executions completed, failed, were skipped ... and the slots
    of its newest success and failure (None if it has none)."""
    (row,) = await _fetch(url, "execution_counts", {"job": job_id})
    return row


async def execution_at(url: str, job_id: str, scheduled_at: datetime) -> dict[str, Any] | None:
    """The `job_executions` row of one slot, if it has one."""
    return await execution_within(url, job_id, scheduled_at, scheduled_at + TICK)


async def edited_slot(url: str, job_id: str, scheduled_at: datetime) -> dict[str, Any] | None:
    """What a timing edit decided for one slot it stranded (`edited_slots`), if any."""
    rows = await _fetch(url, "edited_slot", {"job": job_id, "scheduled_at": scheduled_at})
    return rows[0] if rows else None


async def execution_within(
    url: str, job_id: str, start: datetime, end: datetime
) -> dict[str, Any] | None:
    """The first `job_executions` row of a slot in `[start, end)`, if there is one: the
    row of a manual run, whose slot is its trigger's time to the microsecond."""
    rows = await _fetch(url, "execution_within", {"job": job_id, "start": start, "end": end})
    return rows[0] if rows else None
