"""A worker lost with runtime slots in flight: its slots complete on another replica
within their kind's heartbeat, not its start-to-close timeout (issue 36, item 1).

Twenty `weekly-report` slots run on one worker, each inside its one transaction, queued
behind the test's lock on `weekly_reports` (the fault is placed by the lock, not by timing).
A second worker starts; the first is killed (SIGKILL), or frozen (SIGSTOP) and woken only
at the end. The work activity heartbeats while its transaction waits, so the server times
the lost attempts out after the kind's heartbeat timeout (20 s) and retries them on the
second worker, which takes each slot over once the lost session's row locks are gone (a
killed worker's session ends with its socket, a frozen one's after the idle-in-transaction
timeout). Each slot completes once, one report and one email each, all within 2 minutes
of the fault, and the audit, which judges each slot's completion against its kind's
allowance, is clean.
"""

from __future__ import annotations

import signal
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from jobs import runtime_kinds
from schedules.audit.history import Window
from schedules.audit.runtime import audit_runtime
from schedules.health.runtime import runtime_alerts
from tests.helpers import assert_eventually
from tests.integration import runtime
from tests.integration.runtime import customer

pytestmark = pytest.mark.timeout(300)

SLOTS = 20
# A frozen worker's PostgreSQL session ends this long into its idle transaction.
# Its pool holds a connection for each slot's transaction.
ENV = {"DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS": "6", "DATABASE_POOL_SIZE": "30"}


def blocked_by(db: psycopg.Connection, pid: int) -> list[int]:
    """The backends waiting for a lock `pid` holds."""
    rows = db.execute(
        "SELECT pid FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", (pid,)
    ).fetchall()
    return [p for (p,) in rows]


@pytest.mark.parametrize("fault", [signal.SIGKILL, signal.SIGSTOP], ids=["killed", "frozen"])
async def test_a_lost_workers_runtime_slots_complete_on_another_within_two_minutes(
    db, database_url, client, task_queue, start_workers, fault
):
    runtime.fresh_ids(db)
    minute = datetime.now(UTC).replace(second=0, microsecond=0)
    for i in range(SLOTS):
        tenant = f"loss{i}"
        runtime.insert_schedule(
            db,
            tenant=tenant,
            name="weekly",
            kind="weekly-report",
            params={"customer_id": customer(db, tenant, "UTC")},
            cron="* * * * *",
            timezone="UTC",
            next_fire_at=minute,
            timing_since=minute,
            end_at=minute,  # one slot each
        )
    (lost,) = start_workers(1, **ENV)
    with psycopg.connect(database_url) as lock:
        # Each slot's report statement queues behind this lock, inside the transaction
        # that took the slot over: the lost worker holds every slot's row.
        lock.execute("LOCK TABLE weekly_reports IN EXCLUSIVE MODE")
        async with runtime.dispatcher(database_url, client, task_queue, batches=False) as d:
            await runtime.tick_all(d, minute)

        async def all_queued():
            assert len(blocked_by(db, lock.info.backend_pid)) == SLOTS

        await assert_eventually(all_queued, timeout=90, interval=0.1)
        start_workers(1, **ENV)
        lost.signal(fault)
        at_fault = db.execute("SELECT now()").fetchone()[0]
        try:
            # The lost worker's statements go through (a killed one's sessions then end; a
            # frozen one's never send their next statement and end idle).
            lock.rollback()
            await runtime.settled(db, SLOTS, timeout=180)
        finally:
            if fault == signal.SIGSTOP:
                lost.signal(signal.SIGCONT)

    rows = db.execute(
        "SELECT id, status, duplicate_runs, finished_at FROM job_executions"
        " WHERE job_name LIKE 'rt-%%'"
    ).fetchall()
    assert [r[1] for r in rows] == ["completed"] * SLOTS
    assert sum(r[2] for r in rows) == 0
    # Once each: the lost worker's take-over rolled back with its session (so the other's
    # token is 1 again), and only the other's take-over and completion committed.
    journals = db.execute(
        "SELECT array_agg(attempt || ' ' || what ORDER BY seq) FROM commit_journal"
        " GROUP BY execution_id"
    ).fetchall()
    assert journals == [(["1 take_over", "1 complete"],)] * SLOTS, journals
    latest = max(r[3] for r in rows)
    assert latest - at_fault < timedelta(minutes=2), latest - at_fault
    reports, emails = db.execute(
        "SELECT (SELECT count(*) FROM weekly_reports),"
        " (SELECT count(*) FROM outbox_messages WHERE type = 'WeeklyReport')"
    ).fetchone()
    assert (reports, emails) == (SLOTS, SLOTS)
    allowance = runtime_kinds()["weekly-report"].allowance
    assert all(finished - minute <= allowance for *_, finished in rows)
    await runtime.audit_clean(
        database_url, client, task_queue, minute, minute + timedelta(minutes=1),
        now=datetime.now(UTC),
    )  # fmt: skip


async def test_a_slot_running_or_completed_past_its_kinds_allowance_is_seen(
    db, database_url, client, task_queue, start_workers
):
    """`check` reports a slot still running past its kind's allowance, and the audit a slot
    that completed past it (`slow`): what the ten-minute wait of a lost worker's slot looked
    like, unseen, before. The clock of both is the test's."""
    runtime.fresh_ids(db)
    minute = datetime.now(UTC).replace(second=0, microsecond=0)
    sid = runtime.insert_schedule(
        db,
        tenant="slow",
        name="weekly",
        kind="weekly-report",
        params={"customer_id": customer(db, "slow", "UTC")},
        cron="* * * * *",
        timezone="UTC",
        next_fire_at=minute,
        timing_since=minute,
        end_at=minute,
    )
    allowance = runtime_kinds()["weekly-report"].allowance
    start_workers(1)
    with psycopg.connect(database_url) as lock:
        lock.execute("LOCK TABLE weekly_reports IN EXCLUSIVE MODE")  # the slot stays running
        async with runtime.dispatcher(database_url, client, task_queue, batches=False) as d:
            await runtime.tick_all(d, minute)

        async def queued():
            assert len(blocked_by(db, lock.info.backend_pid)) == 1

        await assert_eventually(queued, timeout=60, interval=0.1)
        (started,) = db.execute("SELECT started_at FROM job_executions").fetchone()
        due = max(minute, started)
        within = await runtime_alerts(database_url, due + allowance, timedelta(days=1), 10)
        past = await runtime_alerts(
            database_url, due + allowance + timedelta(seconds=1), timedelta(days=1), 10
        )
        assert [a for a in within if a[0] == "slow_run"] == []
        (alert,) = [a for a in past if a[0] == "slow_run"]
        assert alert[1] == "runtime:weekly-report"
        assert "1 run(s) still running past their kind's allowance" in alert[2]
        assert f"e.g. schedules {sid} " in alert[2]
    await runtime.settled(db, 1)
    await runtime.audit_clean(
        database_url, client, task_queue, minute, minute + timedelta(minutes=1)
    )

    # The same slot, as if it had completed past its allowance: `slow`, and nothing else.
    db.execute(
        "UPDATE job_executions SET finished_at = greatest(scheduled_at, started_at) + %s",
        (allowance + timedelta(seconds=1),),
    )
    window = Window(
        minute, minute + timedelta(minutes=1), datetime.now(UTC) + allowance * 2,
        timedelta(0), timedelta(minutes=5), timedelta(minutes=15),
    )  # fmt: skip
    judged = await audit_runtime(database_url, client, window, task_queue=task_queue, timeout=30)
    assert [(f.kind, f.job, f.slot) for f in judged.findings] == [("slow", f"rt-{sid}", minute)]
    (finding,) = judged.findings
    assert "(kind weekly-report allows 300s)" in finding.detail
