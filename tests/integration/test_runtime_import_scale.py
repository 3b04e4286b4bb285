"""An import of many one-schedule tenants (issue 36, item 3): the docs' own use case, one
schedule per customer. One advisory lock per tenant in one transaction filled
PostgreSQL's shared lock table (`out of shared memory` at about 13,000 tenants), and every
other session's connection failed while it ran; the locks a write takes are bounded now
(`schedules.tenants.store.lock_tenants`), and the quota stays exact."""

from __future__ import annotations

import asyncio
import contextlib
import json

import psycopg
import pytest

from core.errors import QuotaError
from schedules import tenants
from schedules.tenants import ImportReport, Quotas
from schedules.tenants.store import TENANT_LOCKS
from tests.helpers import assert_eventually
from tests.integration.jobs import waiting_on

TENANTS = 100_000
QUOTAS = Quotas(max_schedules=3)


def one_each(count: int, name: str = "weekly") -> list[str]:
    return [
        json.dumps(
            {
                "tenant": f"customer-{i}",
                "name": name,
                "kind": "test-noop",
                "cron": f"{i % 60} {i % 24} * * {i % 7}",
                "timezone": "UTC",
            }
        )
        for i in range(count)
    ]


async def test_100000_one_schedule_tenants_import_while_other_sessions_connect(db, database_url):
    lines = one_each(TENANTS)
    # The import's writes wait behind this table lock, its tenants' locks taken: the other
    # sessions below connect while it holds all it takes, not by luck of timing.
    with psycopg.connect(database_url) as holder:
        holder.execute("LOCK TABLE runtime_schedules IN EXCLUSIVE MODE")
        importing = asyncio.create_task(tenants.import_lines(database_url, lines, quotas=QUOTAS))

        async def waiting():
            assert not importing.done() or importing.result()
            assert waiting_on(db, "runtime_schedules"), "the import is not waiting yet"

        await assert_eventually(waiting, timeout=240, interval=0.2)
        locks = db.execute(
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
            " WHERE l.locktype = 'advisory' AND a.datname = current_database()"
        ).fetchone()[0]
        for _ in range(20):  # new sessions, each taking locks of its own
            async with await psycopg.AsyncConnection.connect(database_url) as other:
                await other.execute("SELECT count(*) FROM runtime_schedules")
        holder.rollback()
    report = await importing
    assert (report.lines, report.created) == (TENANTS, TENANTS)
    assert 1 <= locks <= TENANT_LOCKS, locks  # bounded, whatever the number of tenants
    stored, logged = db.execute(
        "SELECT count(DISTINCT tenant), (SELECT count(*) FROM runtime_schedule_changes)"
        " FROM runtime_schedules"
    ).fetchone()
    assert (stored, logged) == (TENANTS, TENANTS)


async def test_concurrent_imports_and_creates_keep_each_tenants_quota_exact(database_url):
    # Tenants that share a lock (`TENANT_LOCKS` of them for every tenant) still count
    # their own: each writer adds one schedule to each of 40 tenants holding 2 of 3.
    first = one_each(40, "a") + one_each(40, "b")
    await tenants.import_lines(database_url, first, quotas=QUOTAS)

    async def write(i: int) -> object:
        if i % 2:
            return await tenants.import_lines(database_url, one_each(40, f"w{i}"), quotas=QUOTAS)
        for line in one_each(40, f"w{i}"):  # one connection a writer: the test's 6 at most
            with contextlib.suppress(QuotaError):
                await tenants.create(database_url, json.loads(line), quotas=QUOTAS)
        return None

    results = await asyncio.gather(*(write(i) for i in range(6)), return_exceptions=True)
    assert all(r is None or isinstance(r, (QuotaError, ImportReport)) for r in results), results
    with psycopg.connect(database_url) as conn:
        counts = conn.execute(
            "SELECT tenant, count(*) FROM runtime_schedules GROUP BY tenant"
        ).fetchall()
    assert len(counts) == 40 and {n for _, n in counts} == {3}, counts
    with pytest.raises(QuotaError):
        await tenants.import_lines(database_url, one_each(1, "late"), quotas=QUOTAS)
