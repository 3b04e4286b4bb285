"""The dispatcher of runtime schedules on real servers: per-slot runs and batches, each slot
once under its ledger row, catch-up after downtime by each schedule's policy, ticks that
repeat or race adding nothing. The dispatcher's clock is the test's (`tick(shard, now)`)."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from psycopg_pool import AsyncConnectionPool
from temporalio.testing import ActivityEnvironment

from activities.runtime.dispatch import Dispatcher
from activities.runtime.start_gate import StartGate
from tests.helpers import assert_eventually
from tests.integration import runtime
from tests.integration.runtime import customer

pytestmark = pytest.mark.timeout(180)

MONDAY = datetime(2026, 11, 30, 13, 0, tzinfo=UTC)  # 08:00 in New York


async def test_a_tick_starts_each_due_slot_once(
    db, database_url, client, task_queue, start_workers
):
    start_workers(1)
    runtime.fresh_ids(db)
    reports = []
    for i in range(3):
        cid = customer(db, f"acme{i}", "America/New_York")
        db.execute(
            "INSERT INTO customer_activity (customer_id, occurred_at, kind, amount_cents)"
            " VALUES (%s, %s, 'order', 1250), (%s, %s, 'login', 0)",
            (cid, MONDAY - timedelta(days=2), cid, MONDAY - timedelta(days=8)),
        )
        reports.append(
            runtime.insert_schedule(
                db,
                tenant=f"acme{i}",
                name="weekly",
                kind="weekly-report",
                cron="0 8 * * 1",
                timezone="America/New_York",
                params={"customer_id": cid},
                next_fire_at=MONDAY,
                timing_since=MONDAY - timedelta(hours=1),
            )
        )
    noops = [
        runtime.insert_schedule(
            db,
            tenant=f"t{i}",
            name="ping",
            kind="test-noop",
            cron="0 13 * * *",
            timezone="UTC",
            next_fire_at=MONDAY,
            timing_since=MONDAY - timedelta(hours=1),
        )
        for i in range(5)
    ]
    async with runtime.dispatcher(database_url, client, task_queue) as d:
        early = await runtime.tick_all(d, MONDAY - timedelta(minutes=1))
        assert early.intents == 0  # never a run before its time
        counts = await runtime.tick_all(d, MONDAY)
        assert counts.due == 8 and counts.intents == 8
        await runtime.settled(db, 8)
        again = await runtime.tick_all(d, MONDAY)  # a repeated tick adds nothing
        assert again.intents == 0 and again.started == 0
    for sid in reports + noops:
        rows = runtime.slot_rows(db, sid)
        assert [(r["scheduled_at"], r["status"], r["origin"]) for r in rows] == [
            (MONDAY, "completed", "scheduled")
        ]
    emails = db.execute(
        "SELECT payload->>'to', payload->>'subject' FROM outbox_messages"
        " WHERE type = 'WeeklyReport' ORDER BY 1"
    ).fetchall()
    assert emails == [(f"acme{i}@example.com", "Your week: 1 orders") for i in range(3)]
    assert db.execute("SELECT count(*) FROM weekly_reports WHERE orders = 1").fetchone()[0] == 3
    nexts = db.execute(
        "SELECT DISTINCT next_fire_at FROM runtime_schedules WHERE kind = 'weekly-report'"
    ).fetchall()
    assert nexts == [(MONDAY + timedelta(days=7),)]
    batches = db.execute(
        "SELECT count(DISTINCT workflow_id) FROM runtime_dispatch_intents"
        " WHERE workflow_id LIKE 'rt-batch-%%'"
    ).fetchone()[0]
    assert batches == 4  # test-noop runs in batches: one per shard that had its slots
    judged = await runtime.audit_clean(
        database_url, client, task_queue, MONDAY - timedelta(days=1), MONDAY + timedelta(days=1),
        late=runtime.LATE,
    )  # fmt: skip
    assert sum(s.due for s in judged.scopes) == 8


async def test_two_dispatchers_on_one_shard_split_the_work(
    db, database_url, client, task_queue, start_workers
):
    start_workers(1)
    runtime.fresh_ids(db)
    ids = [
        runtime.insert_schedule(
            db,
            tenant=f"t{i}",
            name="every-minute",
            kind="test-noop",
            cron="* * * * *",
            timezone="UTC",
            next_fire_at=MONDAY,
            timing_since=MONDAY,
        )
        for i in range(40)
    ]
    async with (
        runtime.dispatcher(database_url, client, task_queue) as one,
        runtime.dispatcher(database_url, client, task_queue) as two,
    ):
        for minute in range(3):
            now = MONDAY + timedelta(minutes=minute)
            results = await asyncio.gather(
                *(d.tick(shard, now) for d in (one, two) for shard in range(4))
            )
            assert sum(r.intents for r in results) == 40
        await runtime.settled(db, 120)
    for sid in ids:
        assert [r["status"] for r in runtime.slot_rows(db, sid)] == ["completed"] * 3
    await runtime.audit_clean(
        database_url, client, task_queue, MONDAY, MONDAY + timedelta(minutes=3), late=runtime.LATE
    )


class _HeldStarts(Dispatcher):
    """A dispatcher whose starts only count (no Temporal), behind the test's gate."""

    async def attributes_registered(self) -> bool:
        return False

    async def start(self, workflow_id, first, attributes) -> bool:
        return True


async def test_a_tick_heartbeats_while_its_starts_wait_for_the_process_gate(db, database_url):
    """The gate is shared by every shard a process ticks; a shard whose starts queue behind
    the others' must keep its activity alive (it once timed out on its heartbeat)."""
    runtime.fresh_ids(db)
    runtime.insert_schedule(
        db, tenant="t", name="ping", kind="weekly-report", cron="0 13 * * *", timezone="UTC",
        next_fire_at=MONDAY, timing_since=MONDAY - timedelta(hours=1),
    )  # fmt: skip
    beats: list = []
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, heartbeat_timeout=timedelta(seconds=0.3))
    env.on_heartbeat = lambda *details: beats.append(details)
    gate = StartGate(limit=1)
    others = gate.place("another-shard's-tenant")  # the other shards hold every place
    await others.__aenter__()
    async with AsyncConnectionPool(database_url, min_size=1, max_size=2, open=False) as pool:
        d = _HeldStarts(pool, None, "unused", frozenset(), start_gate=gate)
        (shard,) = db.execute("SELECT shard FROM runtime_schedules").fetchone()
        ticking = asyncio.ensure_future(env.run(d.tick, shard, MONDAY))

        async def beating():
            assert len(beats) >= 3 and not ticking.done()

        await assert_eventually(beating, timeout=30)
        await others.__aexit__(None, None, None)
        counts = await asyncio.wait_for(ticking, 30)
    assert (counts.intents, counts.started) == (1, 1)
