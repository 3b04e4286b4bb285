"""Two jobs of the hourly-sync kind keep their own windows and totals (migration 0013)."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta

import psycopg

from tests.helpers import assert_eventually
from tests.integration.jobs import executions, registered
from tests.integration.test_hourly_sync import backfill, hourly_job, insert_events, this_hour
from worker.migrate import load_migrations

HOUR = timedelta(hours=1)


def totals_by_window(rows: list, windows: list[tuple[datetime, datetime]]) -> dict:
    """The oracle: {(window_start, account): (total, count)} over each [start, end)."""
    totals: dict = defaultdict(lambda: (0, 0))
    for occurred_at, account, amount in rows:
        for start, end in windows:
            if start <= occurred_at < end:
                total, count = totals[start, account]
                totals[start, account] = (total + amount, count + 1)
    return dict(totals)


def stored(db: psycopg.Connection, job_name: str) -> dict:
    found = db.execute(
        "SELECT window_start, account_id, total_cents, event_count FROM hourly_account_totals "
        "WHERE job_name = %s",
        (job_name,),
    ).fetchall()
    return {(w, a): (t, c) for w, a, t, c in found}


async def test_an_hourly_and_a_two_hourly_job_with_windows_starting_together(
    client, db, task_queue, start_workers
):
    even = this_hour() - timedelta(hours=6)
    end = even - timedelta(hours=even.hour % 2)  # an even hour, in the past
    hourly = hourly_job(chunk_size=9).model_copy(update={"id": "sync-hourly"})
    two_hourly = hourly_job(chunk_size=9).model_copy(
        update={"id": "sync-two-hourly", "cron": "0 */2 * * *"}
    )
    rows = insert_events(db, end - 3 * HOUR, end + HOUR, seed=11)
    # Both jobs have a window starting at end - 2h: the hourly one's first, the other's only.
    hourly_windows = [(end - 2 * HOUR, end - HOUR), (end - HOUR, end)]
    two_hourly_windows = [(end - 2 * HOUR, end)]

    start_workers(1)
    async with registered(client, hourly, task_queue), registered(client, two_hourly, task_queue):
        await backfill(client, hourly.id, [end - HOUR, end])
        await backfill(client, two_hourly.id, [end])

        async def all_completed():
            runs = executions(db, hourly.id) + executions(db, two_hourly.id)
            assert [r["status"] for r in runs] == ["completed"] * 3, runs
            return runs

        await assert_eventually(all_completed, timeout=90)

    assert stored(db, hourly.id) == totals_by_window(rows, hourly_windows)
    assert stored(db, two_hourly.id) == totals_by_window(rows, two_hourly_windows)
    windows = db.execute(
        "SELECT job_name, window_start, window_end, status FROM sync_windows ORDER BY 1, 2"
    ).fetchall()
    assert windows == [(hourly.id, start, stop, "done") for start, stop in hourly_windows] + [
        (two_hourly.id, start, stop, "done") for start, stop in two_hourly_windows
    ]


def test_the_migration_gives_existing_windows_and_totals_their_job(postgres):
    url = postgres.create_database("windows_per_job")
    migrations = load_migrations()
    (per_job,) = [m for m in migrations if m.name == "sync_windows_per_job"]
    start = datetime(2026, 1, 1, tzinfo=UTC)
    with psycopg.connect(url, autocommit=True) as conn:
        for migration in migrations[: per_job.version - 1]:
            conn.execute(migration.sql)
        # Before: one job wrote two windows (its execution of the second was cleaned up).
        (execution,) = conn.execute(
            "INSERT INTO job_executions (job_name, scheduled_at, status) "
            "VALUES ('sync-eu', %s, 'completed') RETURNING id",
            (start + HOUR,),
        ).fetchone()
        conn.execute(
            "INSERT INTO sync_windows (window_start, window_end, scheduled_at, execution_id, "
            "status) VALUES (%s, %s, %s, %s, 'done'), (%s, %s, %s, 999999, 'done')",
            (
                start,
                start + HOUR,
                start + HOUR,
                execution,
                start + HOUR,
                start + 2 * HOUR,
                start + 2 * HOUR,
            ),
        )
        conn.execute(
            "INSERT INTO hourly_account_totals VALUES (%s, 1, 100, 1), (%s, 1, 200, 2)",
            (start, start + HOUR),
        )
        conn.execute(per_job.sql)
        assert conn.execute(
            "SELECT job_name, window_start FROM sync_windows ORDER BY window_start"
        ).fetchall() == [("sync-eu", start), ("hourly-sync", start + HOUR)]
        assert conn.execute(
            "SELECT job_name, window_start, total_cents FROM hourly_account_totals "
            "ORDER BY window_start"
        ).fetchall() == [("sync-eu", start, 100), ("hourly-sync", start + HOUR, 200)]
        # The same window start for another job is its own row now.
        conn.execute(
            "INSERT INTO sync_windows (job_name, window_start, window_end, scheduled_at, "
            "execution_id) VALUES ('sync-us', %s, %s, %s, 1)",
            (start, start + 2 * HOUR, start + 2 * HOUR),
        )
