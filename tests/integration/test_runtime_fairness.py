"""Tenants that share a fleet fairly (issue 40) on real servers: the dispatcher takes due
slots round-robin across tenants (weighted), so a backlog of one tenant does not hold back
another's slot. The dispatcher's clock is the test's (`tick(shard, now)`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from activities.dispatch import _Q
from tests.integration.runtime import (
    SHARDS,
    audit_clean,
    dispatcher,
    fresh_ids,
    insert_schedule,
    settled,
    tick_all,
)

pytestmark = pytest.mark.timeout(240)

NOW = datetime(2026, 11, 30, 13, 0, tzinfo=UTC)
LATE = timedelta(days=365)  # the dispatcher's clock is the past: runs are claimed days late


def every_minute(db: psycopg.Connection, tenant: str, name: str, due: datetime) -> int:
    return insert_schedule(
        db, tenant=tenant, name=name, kind="test-noop", cron="* * * * *", timezone="UTC",
        next_fire_at=due, timing_since=due,
    )  # fmt: skip


def intents_by_tenant(db: psycopg.Connection) -> dict[str, int]:
    rows = db.execute(
        "SELECT s.tenant, count(*) FROM runtime_dispatch_intents i"
        " JOIN runtime_schedules s ON s.id = i.schedule_id GROUP BY 1"
    ).fetchall()
    return dict(rows)


async def test_a_single_slot_is_in_the_first_batch_behind_a_backlog(
    db, database_url, client, task_queue, start_workers
):
    start_workers(1)
    fresh_ids(db)
    # The big tenant's 200 slots are all older than the small one's: oldest first, the
    # small tenant would wait for 25 batches of 8.
    for i in range(200):
        every_minute(db, "big", f"s{i}", NOW - timedelta(seconds=30))
    small = every_minute(db, "small", "one", NOW)
    shard = small % SHARDS
    first: list[dict[str, int]] = []

    async def after_decide() -> None:
        if not first:
            first.append(intents_by_tenant(db))

    async with dispatcher(
        database_url, client, task_queue, decide_batch=8, after_decide=after_decide
    ) as d:
        await d.tick(shard, NOW)
        assert first == [{"big": 7, "small": 1}]  # the first batch: one round, then big's
        await tick_all(d, NOW)
    assert intents_by_tenant(db) == {"big": 200, "small": 1}
    await settled(db, 201)
    await audit_clean(
        database_url, client, task_queue, NOW - timedelta(hours=1), NOW + timedelta(seconds=1),
        late=LATE,
    )  # fmt: skip


def test_a_tenant_weight_is_its_slots_per_round(db):
    fresh_ids(db)
    for i in range(12):
        every_minute(db, "heavy", f"h{i}", NOW - timedelta(minutes=10))
        every_minute(db, "light", f"l{i}", NOW - timedelta(minutes=5))
    db.execute("INSERT INTO runtime_tenant_limits (tenant, weight) VALUES ('heavy', 3)")
    db.execute("UPDATE runtime_schedules SET shard = 0")
    with db.transaction():
        rows = db.execute(_Q["due"], {"shard": 0, "now": NOW, "limit": 8, "held": []}).fetchall()
    # Round 0: heavy's 3 oldest, light's oldest; round 1: the same again.
    assert [row[1] for row in rows] == ["heavy"] * 3 + ["light"] + ["heavy"] * 3 + ["light"]
    with db.transaction():
        held = db.execute(
            _Q["due"], {"shard": 0, "now": NOW, "limit": 8, "held": ["heavy"]}
        ).fetchall()
    assert {row[1] for row in held} == {"light"}


async def test_a_run_carries_its_tenant_as_the_fairness_key(
    db, database_url, client, task_queue, start_workers
):
    start_workers(1)
    fresh_ids(db)
    sid = every_minute(db, "acme", "one", NOW)
    async with dispatcher(database_url, client, task_queue, batches=False) as d:
        await d.tick(sid % SHARDS, NOW)
    await settled(db, 1)
    (workflow_id,) = db.execute("SELECT workflow_id FROM runtime_dispatch_intents").fetchone()
    described = await client.get_workflow_handle(workflow_id).describe()
    assert described.raw_description.workflow_execution_info.priority.fairness_key == "acme"
    await audit_clean(
        database_url, client, task_queue, NOW - timedelta(hours=1), NOW + timedelta(seconds=1),
        late=LATE,
    )  # fmt: skip
