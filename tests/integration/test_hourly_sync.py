"""hourly-sync end to end: each run aggregates exactly its own hour of events, once."""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from datetime import UTC, datetime, timedelta

import psycopg
from temporalio.service import RPCError, RPCStatusCode

from schedules.catalog.model import JobSpec
from tests.helpers import assert_eventually
from tests.helpers.audit import audited
from tests.integration.jobs import (
    backfill_slots,
    backfilled_again,
    paused_catalog_job,
    registered,
    runs_completed,
    trigger_at,
)
from workflows import ScheduledJobWorkflow

HOUR = timedelta(hours=1)
MINUTE = timedelta(minutes=1)
ACCOUNTS = range(1, 8)


def hourly_job(**params) -> JobSpec:
    """The catalog's hourly-sync job, `paused_catalog_job`."""
    return paused_catalog_job("hourly-sync", **params)


def this_hour() -> datetime:
    return datetime.now(UTC).replace(minute=0, second=0, microsecond=0)


def insert_events(db: psycopg.Connection, first: datetime, last: datetime, seed: int) -> list:
    """Random events in [first, last), plus one on each hour boundary; return them."""
    rng = random.Random(seed)
    span = int((last - first).total_seconds())
    rows = [
        (
            first + timedelta(seconds=rng.randrange(span)),
            rng.choice(ACCOUNTS),
            rng.randrange(1, 10_000),
        )
        for _ in range(span // 60)
    ]
    hour = first
    while hour < last:  # exactly on a window's start: belongs to that window, not the one before
        rows.append((hour, 1, 1))
        rows.append((hour - timedelta(microseconds=1), 2, 10))
        hour += HOUR
    with db.cursor() as cur:
        cur.executemany(
            "INSERT INTO events (occurred_at, account_id, amount_cents) VALUES (%s, %s, %s)", rows
        )
    return rows


def expected_totals(rows: list, windows: list[datetime]) -> dict:
    """{(window_start, account): (total_cents, count)} for the hour starting at each window."""
    totals: dict = defaultdict(lambda: (0, 0))
    for occurred_at, account, amount in rows:
        start = occurred_at.replace(minute=0, second=0, microsecond=0)
        if start in windows:
            total, count = totals[start, account]
            totals[start, account] = (total + amount, count + 1)
    return dict(totals)


def stored_totals(db: psycopg.Connection) -> dict:
    rows = db.execute(
        "SELECT window_start, account_id, total_cents, event_count FROM hourly_account_totals"
    ).fetchall()
    return {(w, a): (t, c) for w, a, t, c in rows}


def sync_windows(db: psycopg.Connection) -> list[dict]:
    cur = db.cursor(row_factory=psycopg.rows.dict_row)
    return cur.execute("SELECT * FROM sync_windows ORDER BY window_start").fetchall()


async def backfill(client, job_id: str, slots: list[datetime]) -> None:
    await backfill_slots(client, job_id, slots[0], slots[-1])


async def test_backfill_over_five_hours_processes_each_window_once(
    client, db, database_url, task_queue, start_workers
):
    slots = [this_hour() - timedelta(hours=10 - i) for i in range(5)]
    windows = [slot - HOUR for slot in slots]
    # Events from an hour before the first window to an hour after the last one.
    rows = insert_events(db, windows[0] - HOUR, slots[-1] + HOUR, seed=4)
    expected = expected_totals(rows, windows)
    per_window = {w: sum(c for (s, _), (_, c) in expected.items() if s == w) for w in windows}

    start_workers(1)
    job = hourly_job(chunk_size=7)  # several chunks per window
    async with registered(client, job, task_queue):
        await backfill(client, job.id, slots)

        runs = await runs_completed(db, job.id, slots)
        done = sync_windows(db)
        assert [(w["window_start"], w["window_end"]) for w in done] == list(
            zip(windows, slots, strict=True)
        )
        assert [w["status"] for w in done] == ["done"] * 5
        assert [w["execution_id"] for w in done] == [r["id"] for r in runs]
        assert [w["event_count"] for w in done] == [per_window[w] for w in windows]
        assert stored_totals(db) == expected  # exact, and nothing outside the five windows
        for run in runs:
            counts = run["result"]["counts"]
            assert counts["windows"] == 1 and counts["already_done"] == 0
            assert counts["events"] == per_window[run["scheduled_at"] - HOUR]
            assert counts["chunks"] == counts["events"] // 7 + 1

        # The same five hours again: every slot is a recorded no-op, nothing changes.
        again = await backfilled_again(client, db, job.id, slots)
        assert [r["result"] for r in again] == [r["result"] for r in runs]
        assert sync_windows(db) == done
        assert stored_totals(db) == expected
        window = {"start": slots[0], "end": slots[-1] + timedelta(seconds=1)}
        await audited(client, database_url, task_queue, [job], **window, every_fire_time=True)


async def test_another_run_of_a_window_changes_nothing_and_a_failed_holder_is_replaced(
    client, db, task_queue, start_workers
):
    # Two runs triggered between fire times, at 10:10 and 10:20 of a past day, both
    # process the last whole hour before them: [09:00, 10:00).
    window = datetime(2026, 11, 20, 9, tzinfo=UTC)
    first_at, second_at = window + HOUR + 10 * MINUTE, window + HOUR + 20 * MINUTE
    rows = insert_events(db, window - HOUR, window + 2 * HOUR, seed=7)
    expected = expected_totals(rows, [window])

    # An earlier run of this window failed half-way: its claim and partial totals remain.
    (failed_id,) = db.execute(
        "INSERT INTO job_executions (job_name, scheduled_at, status, origin, finished_at)"
        " VALUES ('hourly-sync', %s, 'failed', 'scheduled', now()) RETURNING id",
        (window + HOUR + 3 * MINUTE,),
    ).fetchone()
    db.execute(
        "INSERT INTO sync_windows (job_name, window_start, window_end, scheduled_at, execution_id)"
        " VALUES ('hourly-sync', %s, %s, %s, %s)",
        (window, window + HOUR, window + HOUR, failed_id),
    )
    db.execute(
        "INSERT INTO hourly_account_totals (job_name, window_start, account_id, total_cents,"
        " event_count) VALUES ('hourly-sync', %s, 1, 999999, 1), ('hourly-sync', %s, 99, 5, 1)",
        (window, window),
    )

    start_workers(1)
    job = hourly_job(chunk_size=10)
    async with registered(client, job, task_queue):

        async def run_triggered_at(at: datetime):
            await trigger_at(client, job.id, at)
            workflow_id = f"{job.id}-{at:%Y-%m-%dT%H:%M:%SZ}"
            handle = client.get_workflow_handle_for(ScheduledJobWorkflow.run, workflow_id)

            async def finished():
                try:
                    return await asyncio.wait_for(handle.result(), timeout=60)
                except RPCError as err:  # not started yet
                    assert err.status != RPCStatusCode.NOT_FOUND, err
                    raise

            return await assert_eventually(finished, timeout=60)

        first = await run_triggered_at(first_at)
        assert (first.outcome, first.origin, first.scheduled_at) == (
            "completed",
            "manual",
            first_at,
        )
        assert first.counts["windows"] == 1
        assert first.counts["events"] == sum(c for _, c in expected.values())
        assert stored_totals(db) == expected  # the failed run's partial totals are gone
        (claim,) = sync_windows(db)
        assert claim["execution_id"] == first.execution_id and claim["status"] == "done"

        second = await run_triggered_at(second_at)
        assert second.outcome == "completed" and second.execution_id != first.execution_id
        assert second.counts == {
            "windows": 0,
            "already_done": 1,
            "events": 0,
            "accounts": 0,
            "chunks": 0,
        }
        assert sync_windows(db) == [claim]
        assert stored_totals(db) == expected
