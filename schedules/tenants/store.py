"""Reads and writes of the runtime schedule tables: the statements of `store.sql`, a
connection from a connection string or the caller's own, and the change log.

Every function that writes takes a connection inside a transaction (`transaction(db)`),
so a write and its change-log row commit together or not at all.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from core import redact
from core.errors import ScheduleNotFoundError
from core.sql import queries
from schedules.record import DatabaseUnavailableError, database_hint
from schedules.tenants.model import BUCKETS, Definition, Schedule, stored_dependencies

Q = queries(__package__, "store")
Database = str | AsyncConnection
# The tenants' locks: a tenant's is one of these, by a hash of its name (`lock_tenant`).
TENANT_LOCKS = 256


@asynccontextmanager
async def transaction(db: Database, *, pipeline: bool = True) -> AsyncIterator[AsyncConnection]:
    """A transaction on `db`: a new connection for a connection string (closed after), or
    the caller's connection (a savepoint if it is in a transaction already). Rows come as
    dicts. A connection that cannot be made is `DatabaseUnavailableError` (exit 1), one
    line without the URL.

    In pipeline mode (the default; `COPY` needs it off) a statement whose result is not
    read costs no round trip of its own: a write and its change-log row travel together,
    and a call costs two or three round trips, not one per statement.
    """
    if isinstance(db, AsyncConnection):
        db.row_factory = dict_row  # type: ignore[assignment]
        async with _maybe_pipeline(db, pipeline), db.transaction():
            yield db
        return
    try:
        conn = await AsyncConnection.connect(db, connect_timeout=5, row_factory=dict_row)
    except psycopg.OperationalError as exc:
        reason = (str(exc).strip().splitlines() or ["unreachable"])[0]
        raise DatabaseUnavailableError(
            f"PostgreSQL is unavailable: {redact.scrub(reason)} {database_hint()}"
        ) from None
    async with conn, _maybe_pipeline(conn, pipeline), conn.transaction():
        yield conn


@asynccontextmanager
async def _maybe_pipeline(conn: AsyncConnection, on: bool) -> AsyncIterator[None]:
    if not on:
        yield
        return
    async with conn.pipeline():
        yield


async def one(conn: AsyncConnection, name: str, params: dict[str, Any]) -> dict | None:
    cur = await conn.execute(Q[name], params)
    return await cur.fetchone()  # type: ignore[return-value]


async def all_rows(conn: AsyncConnection, name: str, params: dict[str, Any]) -> list[dict]:
    cur = await conn.execute(Q[name], params)
    return await cur.fetchall()  # type: ignore[return-value]


async def lock_tenant(conn: AsyncConnection, tenant: str) -> None:
    """Hold `tenant`'s lock to the end of the transaction: its writes that count or name
    its schedules (create, import, apply, a dependency check) wait for each other. In
    pipeline mode it travels with the statements after it."""
    await conn.execute(Q["lock_tenant"], {"tenant": tenant, "buckets": TENANT_LOCKS})


async def lock_tenants(conn: AsyncConnection, tenants: list[str]) -> int:
    """Hold the locks of all of `tenants` (an import's), in one statement; how many: at
    most `TENANT_LOCKS`, whatever the number of tenants."""
    row = await one(conn, "lock_tenants", {"tenants": tenants, "buckets": TENANT_LOCKS})
    return row["locks"] if row else 0


def columns(schedule: Definition) -> dict[str, Any]:
    """The row's mutable columns from a definition (params as jsonb)."""
    return {
        "tenant": schedule.tenant,
        "name": schedule.name,
        "kind": schedule.kind,
        "cron": schedule.cron,
        "timezone": schedule.timezone,
        "params": Jsonb(schedule.params),
        "catchup": schedule.catchup,
        "max_missed": schedule.max_missed,
        "start_at": schedule.start_at,
        "end_at": schedule.end_at,
        "paused": schedule.paused,
        "paused_note": schedule.note or None,
        "calendar": schedule.calendar,
        "calendar_definition": _calendar(schedule),
        "on_holiday": schedule.on_holiday if schedule.calendar else None,
        "depends_on": Jsonb(stored_dependencies(schedule)),
    }


def _calendar(schedule: Definition) -> Jsonb | None:
    found = schedule.calendar_definition
    return None if found is None else Jsonb(found.model_dump(mode="json"))


async def insert(
    conn: AsyncConnection,
    schedule: Definition,
    *,
    next_fire_at: datetime | None,
    now: datetime,
    by: str,
) -> Schedule | None:
    """Insert a new schedule and its `create` change-log row; None if a live one of that
    tenant and name exists."""
    row = await one(
        conn,
        "insert_logged",
        columns(schedule)
        | {
            "paused_by": by if schedule.paused else None,
            "shards": BUCKETS,
            "next_fire_at": next_fire_at,
            "timing_since": now,
            "now": now,
            "by": by,
            "after": _snapshot_of(schedule, paused_by=by if schedule.paused else None),
        },
    )
    return Schedule.of_row(row) if row else None


async def live_by_name(conn: AsyncConnection, tenant: str, name: str) -> Schedule | None:
    row = await one(conn, "live_by_name", {"tenant": tenant, "name": name})
    return Schedule.of_row(row) if row else None


async def by_id(
    conn: AsyncConnection, schedule_id: int, *, lock: bool = False, tenant: str | None = None
) -> Schedule:
    """The schedule `schedule_id` (deleted ones too), locked for update if asked; or
    `ScheduleNotFoundError`. Given a `tenant`, another tenant's schedule is not found,
    in the very words of an id that does not exist (the HTTP API's tenancy: a tenant
    cannot even learn that the id exists)."""
    row = await one(conn, "lock_by_id" if lock else "by_id", {"id": schedule_id})
    if row is None or (tenant is not None and row["tenant"] != tenant):
        raise ScheduleNotFoundError(f"no runtime schedule has id {schedule_id}")
    return Schedule.of_row(row)


async def write(conn: AsyncConnection, new: Schedule, *, now: datetime, by: str) -> Schedule:
    """Store `new`'s mutable state over its row; the version goes up by one. (Log the
    change first: in pipeline mode both then travel in one round trip.)"""
    row = await one(
        conn,
        "write",
        columns(new)
        | {
            "id": new.id,
            "paused_by": new.paused_by,
            "deleted_at": new.deleted_at,
            "next_fire_at": new.next_fire_at,
            "timing_since": new.timing_since,
            "now": now,
            "by": by,
        },
    )
    assert row is not None
    return Schedule.of_row(row)


def snapshot(schedule: Schedule | None) -> Jsonb | None:
    """What the change log keeps of a state: its definition, pause and version, and the
    dispatcher's next slot: every slot due before it was decided (written under the row's
    lock, which the dispatcher takes too), which the audit reads at a pause or delete."""
    if schedule is None:
        return None
    data = schedule.model_dump(
        mode="json",
        include=set(Definition.model_fields)
        | {"paused_by", "deleted_at", "version", "next_fire_at"},
    )
    return Jsonb(data)


def _snapshot_of(new: Definition, *, paused_by: str | None) -> Jsonb:
    data = new.model_dump(mode="json", include=set(Definition.model_fields))
    return Jsonb(data | {"paused_by": paused_by, "deleted_at": None, "version": 1})


async def write_logged(
    conn: AsyncConnection,
    before: Schedule,
    new: Schedule,
    action: str,
    *,
    now: datetime,
    by: str,
    detail: dict[str, Any] | None = None,
) -> Schedule:
    """`write` `new` over `before`'s row, with its change-log row (`action`, `detail` added
    to its `after`) in the same transaction; the log is sent first, so in pipeline mode both
    cost one round trip."""
    after = new.model_copy(update={"version": before.version + 1})
    await log_change(
        conn, before.id, action, before=before, after=after, now=now, by=by, detail=detail
    )
    return await write(conn, new, now=now, by=by)


async def log_change(
    conn: AsyncConnection,
    schedule_id: int,
    action: str,
    *,
    before: Schedule | None,
    after: Schedule | None,
    now: datetime,
    by: str,
    detail: dict[str, Any] | None = None,
) -> None:
    """Append one row to the change log, in the caller's transaction."""
    after_data = snapshot(after)
    if detail is not None:
        after_data = Jsonb({**(after_data.obj if after_data else {}), **detail})
    await conn.execute(
        Q["log_change"],
        {
            "schedule_id": schedule_id,
            "now": now,
            "by": by,
            "action": action,
            "before": snapshot(before),
            "after": after_data,
        },
    )


def jsonable(value: Any) -> Any:
    """A row value as JSON text would carry it."""
    return json.loads(json.dumps(value, default=str))
