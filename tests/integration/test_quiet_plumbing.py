"""Quiet plumbing (issue 43, item 1) on real servers: the engine's sessions sleep until a
write wakes them. A dispatcher's session and the relay's, both told to look at their
tables again only every 10 minutes, start a slot and send a message written while they
sleep within the seconds a wake-up takes (bench/idle_plumbing.py measures the delays)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from schedules.catalog.model import default_catalog
from schedules.sync.attributes import runtime_attributes
from tests.helpers import assert_eventually
from tests.integration.jobs import FAST_RETRY, executions, registered
from tests.integration.runtime import (
    BUCKETS,
    SHARDS,
    audit_clean,
    fresh_ids,
    insert_schedule,
    settled,
)
from tests.integration.test_relay import DOMAIN, insert_reminders, message_ids, sink, state

__all__ = ["sink"]  # the fixture, shared with test_relay

pytestmark = pytest.mark.timeout(180)

RECHECK = 600  # far beyond the test's waits: only a wake-up explains a prompt start
SESSION = 25  # seconds: the session ends within the test


def session_job(job_id: str, **params):
    """An engine session job as packaged, paused (the test triggers its one session), with
    a short session that re-reads its tables only every RECHECK seconds."""
    job = default_catalog()[job_id]
    return job.model_copy(
        update={
            "params": job.params | params,
            "retry": FAST_RETRY,
            "paused": True,
            "note": "test: one triggered session",
        }
    )


async def listening(db: psycopg.Connection, channel: str) -> None:
    """Until a session of this database listens on `channel` (it has done its first look)."""

    async def listens():
        (n,) = db.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND query = %s",
            (f"LISTEN {channel}",),
        ).fetchone()
        assert n == 1

    await assert_eventually(listens, timeout=60)


async def completed(db: psycopg.Connection, job_id: str) -> dict:
    async def done():
        (run,) = executions(db, job_id)
        assert run["status"] == "completed", run
        return run

    return await assert_eventually(done, timeout=SESSION + 60)


async def test_a_dispatcher_session_starts_a_slot_written_while_it_sleeps(
    db, database_url, client, task_queue, start_workers
):
    await runtime_attributes(client, register=True)
    base = fresh_ids(db)
    shard = (base + 1) % BUCKETS % SHARDS  # the shard of the schedule written below
    start_workers(1)
    job = session_job(f"runtime-dispatch-{shard}", max_seconds=SESSION, recheck_seconds=RECHECK)
    async with registered(client, job, task_queue):
        await client.get_schedule_handle(job.id).trigger()
        await listening(db, "runtime_due")  # its first tick found nothing: it sleeps
        minute = datetime.now(UTC).replace(second=0, microsecond=0)
        sid = insert_schedule(
            db, tenant="t1", name="woken", kind="test-noop", cron="* * * * *",
            timezone="UTC", next_fire_at=minute, timing_since=minute, end_at=minute,
        )  # fmt: skip

        async def started():
            (n,) = db.execute(
                "SELECT count(started_at) FROM runtime_dispatch_intents WHERE schedule_id = %s",
                (sid,),
            ).fetchone()
            assert n == 1

        await assert_eventually(started, timeout=30)  # well within RECHECK: a wake-up
        await settled(db, 1)
        run = await completed(db, job.id)
    counts = run["result"]["counts"]
    # The first tick at the run's time, one after the write (and none to spare).
    assert counts["ticks"] >= 2 and counts["started"] == 1, counts
    await audit_clean(database_url, client, task_queue, minute, minute + timedelta(minutes=1))


async def test_the_relay_session_sends_a_message_written_while_it_sleeps(
    client,
    db,
    task_queue,
    start_workers,
    sink,
):
    start_workers(1, SMTP_PORT=str(sink.port), OUTBOX_MESSAGE_ID_DOMAIN=DOMAIN)
    job = session_job("outbox-relay", max_seconds=SESSION, poll_seconds=RECHECK)
    async with registered(client, job, task_queue):
        await client.get_schedule_handle(job.id).trigger()
        await listening(db, "outbox_due")
        insert_reminders(db, 3)

        async def delivered():
            assert state(db) == {"pending": 0, "dispatched": 3, "dead": 0}

        await assert_eventually(delivered, timeout=30)  # well within RECHECK: a wake-up
        run = await completed(db, job.id)
    assert run["result"]["counts"]["delivered"] == 3
    assert sorted(sink.message_ids()) == sorted(message_ids(db))
