"""Helpers for tests of runtime schedules: rows, ticks of the dispatcher, the ledger."""

from __future__ import annotations

import contextlib
import random
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool
from temporalio.client import Client

from activities.runtime.dispatch import Dispatcher, TickCounts
from devstack.testing.audit import runtime_audited
from jobs.runtime_dispatch.activities import batch_kinds
from schedules import tenants
from schedules.sync.attributes import runtime_attributes
from tests.helpers import assert_eventually

SHARDS = 4  # the dispatch shards in force by default (activities/runtime/shards.py)
BUCKETS = 16
# The lateness the audit grants a test whose dispatcher's clock is a fixed day in the past:
# its runs are claimed long after their slots (days, a year at most).
LATE = timedelta(days=365)

# The audit of the runtime schedules, clean (one implementation, which users get too).
audit_clean = runtime_audited


def fresh_ids(db: psycopg.Connection) -> int:
    """Start this database's runtime schedule ids at a random base: the tests share one
    Temporal namespace, and each test's database would otherwise number its schedules from
    1, so one test's `rt-1-<slot>` would be another's (Temporal refuses a second start of an
    id that ran). Returns the base."""
    base = random.randrange(1, 2**40) * 16
    db.execute("SELECT setval('runtime_schedules_id_seq', %s)", (base,))
    return base


def insert_schedule(
    db: psycopg.Connection,
    *,
    tenant: str,
    name: str,
    kind: str,
    cron: str,
    timezone: str,
    next_fire_at: datetime,
    timing_since: datetime,
    params: dict[str, Any] | None = None,
    catchup: str = "latest",
    max_missed: int | None = None,
    paused: bool = False,
    end_at: datetime | None = None,
) -> int:
    """One runtime schedule row, as the API writes it (its bucket: id % BUCKETS)."""
    return db.execute(
        """
        WITH n AS (SELECT nextval('runtime_schedules_id_seq') AS id)
        INSERT INTO runtime_schedules
            (id, tenant, name, kind, cron, timezone, params, catchup, max_missed, paused,
             shard, next_fire_at, timing_since, end_at)
        SELECT id, %s, %s, %s, %s, %s, %s, %s, %s, %s, id %% %s, %s, %s, %s FROM n
        RETURNING id
        """,
        (
            tenant,
            name,
            kind,
            cron,
            timezone,
            Jsonb(params or {}),
            catchup,
            max_missed,
            paused,
            BUCKETS,
            next_fire_at,
            timing_since,
            end_at,
        ),
    ).fetchone()[0]


@contextlib.asynccontextmanager
async def dispatcher(
    database_url: str, client: Client, task_queue: str, *, batches: bool = True, **options: Any
) -> AsyncIterator[Dispatcher]:
    """A dispatcher driven by the test: `await d.tick(shard, now)` with the test's clock.
    `batches` False: every slot runs on its own (`RuntimeRunWorkflow`), batch kinds too."""
    await runtime_attributes(client, register=True)
    kinds = batch_kinds() if batches else frozenset()
    async with AsyncConnectionPool(database_url, min_size=1, max_size=4, open=False) as pool:
        yield Dispatcher(pool, client, task_queue, kinds, **options)


async def tick_all(d: Dispatcher, now: datetime) -> TickCounts:
    """One tick of every shard at `now`; the counts summed."""
    total = TickCounts()
    for shard in range(SHARDS):
        counts = await d.tick(shard, now)
        for key, value in counts.as_dict().items():
            setattr(total, key, getattr(total, key) + value)
    return total


def slot_rows(db: psycopg.Connection, schedule_id: int) -> list[dict]:
    cur = db.cursor(row_factory=psycopg.rows.dict_row)
    return cur.execute(
        "SELECT * FROM job_executions WHERE job_name = %s ORDER BY scheduled_at",
        (f"rt-{schedule_id}",),
    ).fetchall()


async def settled(db: psycopg.Connection, count: int, timeout: float = 60.0) -> None:
    """Wait until `count` runtime ledger rows are terminal and none is running."""

    async def done():
        running, terminal = db.execute(
            "SELECT count(*) FILTER (WHERE status = 'running'),"
            " count(*) FILTER (WHERE status <> 'running')"
            " FROM job_executions WHERE job_name LIKE 'rt-%%'"
        ).fetchone()
        assert (running, terminal) == (0, count), db.execute(
            "SELECT job_name, scheduled_at, status, origin FROM job_executions"
            " WHERE job_name LIKE 'rt-%%' ORDER BY 1, 2"
        ).fetchall()

    await assert_eventually(done, timeout=timeout, interval=0.2)


def customer(db: psycopg.Connection, tenant: str, zone: str) -> int:
    """A new customer of `tenant` in time zone `zone`; its id."""
    return db.execute(
        "INSERT INTO customers (tenant, name, email, timezone) VALUES (%s, %s, %s, %s)"
        " RETURNING id",
        (tenant, tenant.title(), f"{tenant}@example.com", zone),
    ).fetchone()[0]


async def failing_weekly(
    db: psycopg.Connection, database_url: str, now: datetime, pause_after: int
) -> int:
    """Tenant acme's weekly-report schedule, due every minute from `now`, paused after
    `pause_after` failures in a row; each of its slots fails: its customer is another
    tenant's now (refused, sending nothing). Its id."""
    acme = customer(db, "acme", "UTC")
    sid = insert_schedule(
        db, tenant="acme", name="weekly", kind="weekly-report", cron="* * * * *",
        timezone="UTC", params={"customer_id": acme}, next_fire_at=now, timing_since=now,
    )  # fmt: skip
    await tenants.set_pause_after_failures(database_url, sid, pause_after, by="test")
    db.execute("UPDATE customers SET tenant = 'initech' WHERE id = %s", (acme,))
    return sid
