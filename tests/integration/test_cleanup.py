"""weekly-cleanup end to end: old delivered messages and old records go, nothing else does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
from temporalio.client import ScheduleOverlapPolicy

from schedules.catalog.model import JobSpec
from tests.helpers import assert_eventually
from tests.helpers.audit import audited
from tests.integration.jobs import executions, paused_catalog_job, registered

DAY = timedelta(days=1)


def cleanup_job(**params) -> JobSpec:
    """The catalog's weekly-cleanup job, `paused_catalog_job` (its batches test-sized too)."""
    return paused_catalog_job("weekly-cleanup", "test: triggered runs only", **params)


def add_messages(
    db: psycopg.Connection,
    label: str,
    n: int,
    age: timedelta,
    dispatched: bool = False,
    dead: bool = False,
) -> None:
    now = datetime.now(UTC)
    db.execute(
        """
        INSERT INTO outbox_messages
            (type, payload, idempotency_key, occurred_at, dispatched_at, dead_at, last_error)
        SELECT %(label)s, '{}'::jsonb, %(label)s || ':' || n, %(at)s, %(dispatched)s, %(dead)s,
               CASE WHEN %(dead)s::timestamptz IS NOT NULL THEN 'rejected' END
        FROM generate_series(1, %(n)s) AS n
        """,
        {
            "label": label,
            "n": n,
            "at": now - age - timedelta(minutes=1),
            "dispatched": now - age if dispatched else None,
            "dead": now - age if dead else None,
        },
    )


def add_executions(
    db: psycopg.Connection, job: str, n: int, age: timedelta, status: str = "completed"
) -> None:
    """`n` daily runs of `job`, the newest finished `age` ago."""
    now = datetime.now(UTC)
    db.execute(
        """
        INSERT INTO job_executions
            (job_name, scheduled_at, status, origin, started_at, finished_at)
        SELECT %(job)s, %(newest)s - make_interval(days => n), %(status)s, 'scheduled',
               %(newest)s - make_interval(days => n), %(newest)s - make_interval(days => n)
                   + interval '1 minute'
        FROM generate_series(0, %(n)s - 1) AS n
        """,
        {"job": job, "n": n, "newest": now - age - timedelta(minutes=1), "status": status},
    )


def left(db: psycopg.Connection, table: str, column: str) -> dict[str, int]:
    query = f"SELECT {column}, count(*) FROM {table} GROUP BY 1"  # noqa: S608 (test constants)
    return dict(db.execute(query).fetchall())


async def test_cleanup_deletes_old_delivered_and_finished_rows_in_short_batches_only(
    client, db, database_url, task_queue, start_workers
):
    add_messages(db, "old-delivered", 40, 45 * DAY, dispatched=True)
    add_messages(db, "recent-delivered", 5, 5 * DAY, dispatched=True)
    add_messages(db, "old-undelivered", 6, 200 * DAY)
    add_messages(db, "old-dead", 3, 200 * DAY, dead=True)
    add_messages(db, "old-locked", 1, 45 * DAY, dispatched=True)

    add_executions(db, "retired-job", 20, 180 * DAY)  # all old: the newest one stays
    add_executions(db, "flaky-job", 3, 100 * DAY, status="failed")
    add_executions(db, "flaky-job", 2, 100 * DAY + 3 * DAY, status="skipped")
    add_executions(db, "flaky-job", 4, 2 * DAY)  # recent
    # A running row (with a finished_at left over from an older attempt) is never deleted.
    add_executions(db, "flaky-job", 1, 300 * DAY, status="running")

    start_workers(1)
    job = cleanup_job(batch_size=7, outbox_retention_days=30, executions_retention_days=90)
    # Another transaction holds one old row: the cleanup skips it instead of waiting.
    with psycopg.connect(db.info.dsn) as holder:
        holder.execute("SELECT id FROM outbox_messages WHERE type = 'old-locked' FOR UPDATE")
        async with registered(client, job, task_queue):
            await client.get_schedule_handle(job.id).trigger(
                overlap=ScheduleOverlapPolicy.ALLOW_ALL
            )

            async def completed():
                runs = executions(db, job.id)
                assert [r["status"] for r in runs] == ["completed"]
                return runs[0]

            run = await assert_eventually(completed, timeout=60)
        holder.rollback()

    counts = run["result"]["counts"]
    assert counts["outbox_deleted"] == 40
    assert counts["executions_deleted"] == 19 + 5
    # Batches of 7: 6 for the outbox (40 rows), 4 for executions (24 rows); none longer.
    assert counts["batches"] == 6 + 4
    assert left(db, "outbox_messages", "type") == {
        "recent-delivered": 5,
        "old-undelivered": 6,
        "old-dead": 3,
        "old-locked": 1,
    }
    assert left(db, "job_executions", "job_name || ':' || status") == {
        "retired-job:completed": 1,
        "flaky-job:completed": 4,
        "flaky-job:running": 1,
        "weekly-cleanup:completed": 1,  # its own record
    }
    newest = db.execute(
        "SELECT max(scheduled_at) FROM job_executions WHERE job_name = 'retired-job'"
    ).fetchone()[0]
    assert newest > datetime.now(UTC) - 181 * DAY

    # Next week the row no longer held is deleted too.
    async with registered(client, job, task_queue):

        async def later_second():
            assert datetime.now(UTC).replace(microsecond=0) > run["scheduled_at"]

        await assert_eventually(later_second, timeout=30)
        await client.get_schedule_handle(job.id).trigger(overlap=ScheduleOverlapPolicy.ALLOW_ALL)

        async def second_completed():
            runs = executions(db, job.id)
            assert [r["status"] for r in runs] == ["completed"] * 2
            return runs[-1]

        second = await assert_eventually(second_completed, timeout=60)
        await audited(client, database_url, task_queue, [job], start=run["scheduled_at"])
    assert second["result"]["counts"]["outbox_deleted"] == 1
    assert "old-locked" not in left(db, "outbox_messages", "type")
