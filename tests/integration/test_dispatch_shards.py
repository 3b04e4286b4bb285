"""Dispatch shards as a live setting (issue 40, item 5) on real servers: the count changes
4 -> 16 -> 4 while every-minute runtime schedules fire, and every slot runs once; `sync`
makes the engine's dispatchers follow RUNTIME_DISPATCH_SHARDS, in the order that leaves no
bucket without a dispatcher."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from activities.runtime.dispatch import TickCounts
from devstack.testing.worker import settings_env
from schedules.catalog.model import load_catalog
from schedules.sync.apply import sync
from schedules.sync.shards import DISPATCHER, plan_shards
from tests.helpers import ROOT
from tests.helpers.worker import schedules_cli
from tests.integration.jobs import managed_become
from tests.integration.runtime import audit_clean, dispatcher, fresh_ids, insert_schedule, settled
from tests.integration.test_sync import clean  # noqa: F401 (fixture)

pytestmark = pytest.mark.timeout(300)

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
LATE = timedelta(days=365)  # the dispatcher's clock is the past: runs are claimed days late
MINUTES = 8
SCHEDULES = 32  # two in each of the 16 buckets


def every_minute(db, tenant: str, name: str) -> int:
    return insert_schedule(
        db, tenant=tenant, name=name, kind="test-noop", cron="* * * * *", timezone="UTC",
        next_fire_at=NOW, timing_since=NOW,
    )  # fmt: skip


async def test_the_count_changes_4_16_4_while_every_minute_schedules_fire(
    db, database_url, client, task_queue, start_workers
):
    start_workers(1)
    fresh_ids(db)  # a multiple of 16: the ids fill every bucket alike
    ids = [every_minute(db, f"t{i % 5}", f"s{i}") for i in range(SCHEDULES)]
    assert {sid % 16 for sid in ids} == set(range(16))
    # 16 shards from the fourth minute, 4 again from the seventh (as `sync` records them).
    db.execute(
        "INSERT INTO runtime_dispatch_shards (from_tick, shards) VALUES (%s, 16), (%s, 4)",
        (NOW + timedelta(minutes=3), NOW + timedelta(minutes=6)),
    )
    decided: dict[tuple[int, int], TickCounts] = {}
    async with dispatcher(database_url, client, task_queue, batches=False) as d:
        for minute in range(MINUTES):
            now = NOW + timedelta(minutes=minute)
            # Every dispatcher the count could need ticks, all at once, in any order.
            shards = random.sample(range(16), 16)
            counts = await asyncio.gather(*(d.tick(shard, now) for shard in shards))
            decided |= {(minute, s): c for s, c in zip(shards, counts, strict=True)}
    # Each minute split its schedules between the shards in force, two per bucket.
    for minute in range(MINUTES):
        wanted = 16 if 3 <= minute < 6 else 4
        dues = [decided[minute, shard].due for shard in range(16)]
        assert dues == [SCHEDULES // wanted] * wanted + [0] * (16 - wanted), minute
        # A shard beyond the count ends at once: it read the count, nothing more.
        assert all(decided[minute, s].statements == 1 for s in range(wanted, 16))
    await settled(db, SCHEDULES * MINUTES, timeout=180)
    slots = db.execute(
        "SELECT count(*), count(DISTINCT (job_name, scheduled_at)),"
        " count(*) FILTER (WHERE status = 'completed') FROM job_executions"
        " WHERE job_name LIKE 'rt-%%'"
    ).fetchone()
    assert slots == (SCHEDULES * MINUTES,) * 3
    await audit_clean(
        database_url, client, task_queue, NOW, NOW + timedelta(minutes=MINUTES), late=LATE
    )


def dispatchers(n: int) -> set[str]:
    return {DISPATCHER.format(i) for i in range(n)}


async def test_sync_grows_the_dispatchers_first_and_prunes_them_once_the_count_stood(
    db,
    database_url,
    client,
    task_queue,
    clean,  # noqa: F811 (fixture)
):
    async def follow(wanted: int, now: datetime):
        plan = await plan_shards(database_url, wanted, now)
        # The engine's dispatchers alone, paused: no tick fires on this test's server.
        jobs = [
            job.model_copy(update={"paused": True})
            for job in load_catalog(shards=plan.keep)
            if job.kind == "runtime-dispatch"
        ]
        report = await sync(
            client, jobs, task_queue, now=now, conninfo=database_url, shards=plan,
            max_prune=1.0,
        )  # fmt: skip
        return plan, report

    t0 = datetime.now(UTC).replace(second=0, microsecond=0)
    plan, report = await follow(16, t0)
    assert (plan.recorded, plan.keep) == (4, 16)
    assert set(report.created) == dispatchers(16)
    first = t0 + timedelta(minutes=2)  # the second minute boundary after the sync
    assert report.shards_from == first
    await managed_become(client, dispatchers(16))
    # Back to 4, ten minutes on: recorded from two minutes ahead, the 16 dispatchers kept.
    t1 = t0 + timedelta(minutes=10)
    plan, report = await follow(4, t1)
    assert (plan.recorded, plan.keep, report.deleted) == (16, 16, [])
    assert report.shards_from == t1 + timedelta(minutes=2)
    # A minute after the change took effect: a tick of the minute before may still start.
    plan, report = await follow(4, t1 + timedelta(minutes=3))
    assert (plan.keep, report.deleted, report.shards_from) == (16, [], None)
    # Once 4 has stood two minutes, the extra twelve go.
    plan, report = await follow(4, t1 + timedelta(minutes=4))
    assert plan.keep == 4 and set(report.deleted) == dispatchers(16) - dispatchers(4)
    await managed_become(client, dispatchers(4))
    history = db.execute("SELECT from_tick, shards FROM runtime_dispatch_shards").fetchall()
    assert history[1:] == [(first, 16), (t1 + timedelta(minutes=2), 4)]


def test_a_shard_count_that_does_not_divide_the_buckets_is_refused(settings):
    done = schedules_cli(settings, "sync", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "dispatch shards: 4" in done.stdout
    refused = subprocess.run(
        [sys.executable, "-m", "schedules", "sync"],
        cwd=ROOT, env=settings_env(settings, RUNTIME_DISPATCH_SHARDS="5"),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert refused.returncode == 2, refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert "runtime_dispatch_shards" in line.lower() and "5" in line, line
