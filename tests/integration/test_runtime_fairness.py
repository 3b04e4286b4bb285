"""Tenants that share a fleet fairly (issue 40) on real servers: the dispatcher takes due
slots round-robin across tenants (weighted), so a backlog of one tenant does not hold back
another's slot. The dispatcher's clock is the test's (`tick(shard, now)`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from activities.runtime.dispatch import _Q
from core.errors import InvalidScheduleError
from schedules import tenants
from schedules.health.runtime import runtime_alerts
from tests.helpers import assert_eventually
from tests.integration import runtime
from tests.integration.test_runtime_schedules_cli import cli, one_error_line

pytestmark = pytest.mark.timeout(240)

NOW = datetime(2026, 11, 30, 13, 0, tzinfo=UTC)


def every_minute(db: psycopg.Connection, tenant: str, name: str, due: datetime) -> int:
    return runtime.insert_schedule(
        db, tenant=tenant, name=name, kind="test-noop", cron="* * * * *", timezone="UTC",
        next_fire_at=due, timing_since=due,
    )  # fmt: skip


def running(db: psycopg.Connection) -> int:
    return db.execute(
        "SELECT count(*) FROM job_executions WHERE job_name LIKE 'rt-%%' AND status = 'running'"
    ).fetchone()[0]


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
    runtime.fresh_ids(db)
    # The big tenant's 200 slots are all older than the small one's: oldest first, the
    # small tenant would wait for 25 batches of 8.
    for i in range(200):
        every_minute(db, "big", f"s{i}", NOW - timedelta(seconds=30))
    small = every_minute(db, "small", "one", NOW)
    shard = small % runtime.SHARDS
    first: list[dict[str, int]] = []

    async def after_decide() -> None:
        if not first:
            first.append(intents_by_tenant(db))

    async with runtime.dispatcher(
        database_url, client, task_queue, decide_batch=8, after_decide=after_decide
    ) as d:
        await d.tick(shard, NOW)
        assert first == [{"big": 7, "small": 1}]  # the first batch: one round, then big's
        await runtime.tick_all(d, NOW)
    assert intents_by_tenant(db) == {"big": 200, "small": 1}
    await runtime.settled(db, 201)
    await runtime.audit_clean(
        database_url, client, task_queue, NOW - timedelta(hours=1), NOW + timedelta(seconds=1),
        late=runtime.LATE,
    )  # fmt: skip


def test_a_tenant_weight_is_its_slots_per_round(db):
    runtime.fresh_ids(db)
    for i in range(12):
        every_minute(db, "heavy", f"h{i}", NOW - timedelta(minutes=10))
        every_minute(db, "light", f"l{i}", NOW - timedelta(minutes=5))
    db.execute("INSERT INTO runtime_tenant_limits (tenant, weight) VALUES ('heavy', 3)")
    db.execute("UPDATE runtime_schedules SET shard = 0")
    with db.transaction():
        rows = db.execute(
            _Q["due"], {"buckets": [0], "now": NOW, "limit": 8, "held": []}
        ).fetchall()
    # Round 0: heavy's 3 oldest, light's oldest; round 1: the same again.
    assert [row[1] for row in rows] == ["heavy"] * 3 + ["light"] + ["heavy"] * 3 + ["light"]
    with db.transaction():
        held = db.execute(
            _Q["due"], {"buckets": [0], "now": NOW, "limit": 8, "held": ["heavy"]}
        ).fetchall()
    assert {row[1] for row in held} == {"light"}


async def test_a_run_carries_its_tenant_as_the_fairness_key(
    db, database_url, client, task_queue, start_workers
):
    start_workers(1)
    runtime.fresh_ids(db)
    sid = every_minute(db, "acme", "one", NOW)
    async with runtime.dispatcher(database_url, client, task_queue, batches=False) as d:
        await d.tick(sid % runtime.SHARDS, NOW)
    await runtime.settled(db, 1)
    (workflow_id,) = db.execute("SELECT workflow_id FROM runtime_dispatch_intents").fetchone()
    described = await client.get_workflow_handle(workflow_id).describe()
    assert described.raw_description.workflow_execution_info.priority.fairness_key == "acme"
    await runtime.audit_clean(
        database_url, client, task_queue, NOW - timedelta(hours=1), NOW + timedelta(seconds=1),
        late=runtime.LATE,
    )  # fmt: skip


async def test_a_limit_of_two_in_flight_holds_under_a_burst_of_fifty(
    db, database_url, client, task_queue, start_workers
):
    """50 slots of one tenant due at once, its limit 2 in flight: the dispatcher starts 2,
    defers the others (audit, check and explain say so), and starts 2 more as those
    finish; from the ledger, never 3 running at once; every slot once."""
    start_workers(1)
    runtime.fresh_ids(db)
    minute = datetime.now(UTC).replace(second=0, microsecond=0)
    cid = db.execute(
        "INSERT INTO customers (tenant, name, email, timezone)"
        " VALUES ('burst', 'Burst', 'burst@example.com', 'UTC') RETURNING id"
    ).fetchone()[0]
    ids = [
        runtime.insert_schedule(
            db,
            tenant="burst",
            name=f"r{i}",
            kind="weekly-report",
            cron="* * * * *",
            timezone="UTC",
            params={"customer_id": cid},
            next_fire_at=minute,
            timing_since=minute,
            end_at=minute,  # one slot each
        )
        for i in range(50)
    ]
    await tenants.set_limits(database_url, "burst", max_in_flight=2, by="test")
    async with runtime.dispatcher(database_url, client, task_queue, batches=False) as d:
        with psycopg.connect(database_url) as lock:
            # Each run's report waits behind this lock, its ledger row claimed (running).
            lock.execute("LOCK TABLE weekly_reports IN EXCLUSIVE MODE")
            first = await runtime.tick_all(d, minute)
            assert first.intents == 2

            async def two_running():
                assert running(db) == 2

            await assert_eventually(two_running, timeout=90, interval=0.1)
            again = await runtime.tick_all(d, minute)
            assert again.intents == 0 and again.deferred > 0
            held = [i for i in ids if db.execute(
                "SELECT deferred_at IS NOT NULL FROM runtime_schedules WHERE id = %s", (i,)
            ).fetchone()[0]]  # fmt: skip
            told = await tenants.explain(database_url, held[0], minute)
            assert told.verdict.startswith(
                "deferred by the tenant's limit: 2 in flight (limit 2), waited "
            ), told.verdict
            alerts = await runtime_alerts(database_url, minute, timedelta(days=1), 10)
            assert [a[:2] for a in alerts] == [("tenant_deferred", "tenant:burst")], alerts
            assert "2 in flight (limit 2)" in alerts[0][2]
            judged = await runtime.audit_clean(
                database_url, client, task_queue, minute, minute + timedelta(seconds=1)
            )
            assert (
                "deferred by the tenant's limit: 2 in flight (limit 2)"
                in judged.scopes[[s.job.schedule_id for s in judged.scopes].index(held[0])].note
            )
            lock.rollback()

        async def all_decided():
            await runtime.tick_all(d, minute)
            assert intents_by_tenant(db) == {"burst": 50}

        await assert_eventually(all_decided, timeout=180, interval=0.2)
    await runtime.settled(db, 50, timeout=120)
    spans = db.execute(
        "SELECT started_at, finished_at FROM job_executions WHERE job_name LIKE 'rt-%%'"
    ).fetchall()
    most = max(sum(1 for s, f in spans if s <= at < f) for at, _ in spans)
    assert most == 2, most  # never 3 running, counted from the ledger
    assert (
        db.execute(
            "SELECT count(*) FROM runtime_schedules WHERE deferred_at IS NOT NULL"
        ).fetchone()[0]
        == 0
    )
    await runtime.audit_clean(
        database_url, client, task_queue, minute, minute + timedelta(seconds=1)
    )


async def test_limits_on_the_command_line_and_bad_input(database_url, db):
    bad = cli(database_url, "limits", "set", "acme", "--max-in-flight", "0")
    assert bad.returncode == 2
    assert one_error_line(bad) == (
        "error: max_in_flight: must be a positive whole number (at most 2147483647), got 0"
    )
    none = cli(database_url, "limits", "set", "acme")
    assert none.returncode == 2 and "give at least one of" in one_error_line(none)
    with pytest.raises(InvalidScheduleError, match=r"^weight: .* got 1001$"):
        await tenants.set_limits(database_url, "acme", weight=1001)
    assert db.execute("SELECT count(*) FROM runtime_tenant_limits").fetchone()[0] == 0
    done = cli(
        database_url, "limits", "set", "acme", "--max-in-flight", "2", "--weight", "3",
        RUNTIME_TENANT_MAX_PER_MINUTE="50",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "acme: max in flight 2, max per minute default (50), weight 3; "
        "0 in flight, 0 schedule(s) deferred"
    )
    more = await tenants.set_limits(database_url, "acme", max_per_minute=10)
    assert (more.max_in_flight, more.max_per_minute, more.weight) == (2, 10, 3)  # rest kept
    cleared = cli(database_url, "limits", "clear", "acme")
    assert cleared.stdout.strip().startswith(
        "acme: max in flight default (none), max per minute default (none), weight 1"
    )


async def test_k_consecutive_failures_pause_the_schedule_and_one_more_does_not_run(
    db, database_url, client, task_queue, start_workers
):
    start_workers(1)
    runtime.fresh_ids(db)
    sid = await runtime.failing_weekly(db, database_url, NOW, pause_after=2)
    async with runtime.dispatcher(database_url, client, task_queue, batches=False) as d:
        for minute in range(3):
            await runtime.tick_all(d, NOW + timedelta(minutes=minute))
            await runtime.settled(db, min(minute + 1, 2))
    rows = db.execute(
        "SELECT scheduled_at, status FROM job_executions WHERE job_name = %s ORDER BY 1",
        (f"rt-{sid}",),
    ).fetchall()
    assert rows == [(NOW, "failed"), (NOW + timedelta(minutes=1), "failed")]  # not a third
    paused, by, note = db.execute(
        "SELECT paused, paused_by, paused_note FROM runtime_schedules WHERE id = %s", (sid,)
    ).fetchone()
    assert (paused, by) == (True, "auto")
    assert note.startswith(
        "auto-paused after 2 consecutive failed slot(s) "
        "(2026-11-30T13:00:00Z, 2026-11-30T13:01:00Z); last error: "
    ), note
    assert "names no customer of tenant 'acme'" in note
    alerts = await runtime_alerts(database_url, NOW, timedelta(days=30), 10)
    assert ("auto_paused", "runtime:weekly-report") in [a[:2] for a in alerts], alerts
    # A resume starts the count again: the next failure alone does not pause it.
    await tenants.resume(database_url, sid, by="test")
    db.execute("UPDATE runtime_schedules SET next_fire_at = %s WHERE id = %s",
               (NOW + timedelta(minutes=3), sid))  # fmt: skip
    async with runtime.dispatcher(database_url, client, task_queue, batches=False) as d:
        await runtime.tick_all(d, NOW + timedelta(minutes=3))
        await runtime.settled(db, 3)
    assert db.execute("SELECT paused FROM runtime_schedules WHERE id = %s", (sid,)).fetchone() == (
        False,
    )
    await runtime.audit_clean(
        database_url, client, task_queue, NOW, NOW + timedelta(minutes=2), late=runtime.LATE
    )
