"""card-settlement end to end: real schedule, real worker process, real Postgres."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from temporalio.testing import ActivityEnvironment

from activities.chunks.chunked import fenced
from activities.claim.executions import ExecutionActivities, Fence, StaleAttemptError
from activities.common.models import ClaimInput, ExecutionRef, WorkInput
from activities.run.kinds import build_kind_activities
from devstack.temporal import temporal_binary
from jobs import KINDS
from jobs.card_settlement.activities import settle_chunk
from schedules.catalog.model import JobSpec, default_catalog
from tests.helpers import assert_eventually
from tests.helpers.audit import audited
from tests.integration.jobs import (
    FAST_RETRY,
    executions,
    fire_once,
    fired,
    registered,
    runs_closed,
    wait_until,
)

JOB = "card-settlement"
MINUTE = timedelta(minutes=1)


def settlement_job(**update) -> JobSpec:
    """The catalog's card-settlement job, with test-sized retries and chunks.

    Paused: its every-minute cron would add runs of its own to a test's triggered ones.
    A manual trigger still runs a paused schedule.
    """
    job = default_catalog()[JOB]
    return job.model_copy(
        update={
            "params": job.params | {"chunk_size": 1000},
            "retry": FAST_RETRY,
            "paused": True,
            "note": "test: triggered runs only",
        }
        | update
    )


def capture(db: psycopg.Connection, count: int, ago: timedelta, currency: str = "USD") -> None:
    """Insert `count` payments captured `ago` before now (negative: in the future)."""
    db.execute(
        """
        INSERT INTO card_payments (amount_cents, currency, captured_at)
        SELECT 100 + n %% 900, %s, now() - %s FROM generate_series(1, %s) AS n
        """,
        (currency, ago, count),
    )


def captured(db: psycopg.Connection) -> int:
    return db.execute("SELECT count(*) FROM card_payments WHERE status = 'captured'").fetchone()[0]


def batches(db: psycopg.Connection) -> list[dict]:
    cur = db.cursor(row_factory=psycopg.rows.dict_row)
    return cur.execute("SELECT * FROM settlement_batches ORDER BY scheduled_at").fetchall()


def settled_by_batch(db: psycopg.Connection) -> dict[int | None, tuple[int, int]]:
    rows = db.execute(
        "SELECT settlement_batch_id, count(*), sum(amount_cents) FROM card_payments"
        " WHERE status = 'settled' GROUP BY 1"
    ).fetchall()
    return {batch: (n, cents) for batch, n, cents in rows}


def first_cents(db: psycopg.Connection, n: int) -> int:
    """The total of the first `n` payments by id."""
    return db.execute(
        "SELECT sum(amount_cents) FROM (SELECT amount_cents FROM card_payments ORDER BY id LIMIT %s) t",
        (n,),
    ).fetchone()[0]


def trigger(address: str) -> None:
    """The README's command: `temporal schedule trigger --schedule-id card-settlement`."""
    subprocess.run(
        [temporal_binary(), "schedule", "trigger", "--schedule-id", JOB, "--address", address],
        check=True,
        capture_output=True,
    )


async def completed_runs(db: psycopg.Connection, n: int) -> list[dict]:
    async def done():
        rows = executions(db, JOB)
        assert len(rows) == n and all(r["status"] == "completed" for r in rows), rows
        return rows

    return await assert_eventually(done, timeout=60)


async def test_triggered_runs_settle_each_captured_payment_once_in_one_batch_a_run(
    client, db, database_url, task_queue, start_workers, temporal
):
    capture(db, 2500, MINUTE)
    capture(db, 5, MINUTE, currency="EUR")  # another currency's job
    capture(db, 7, -timedelta(hours=1))  # after any slot here: not this run's
    db.execute(
        "INSERT INTO card_payments (amount_cents, currency, status, captured_at, settled_at)"
        " SELECT 1000, 'USD', 'settled', now() - interval '1 day', now() - interval '1 day'"
        " FROM generate_series(1, 10)"
    )
    (expected_cents,) = db.execute(
        "SELECT sum(amount_cents) FROM card_payments"
        " WHERE status = 'captured' AND currency = 'USD' AND captured_at < now()"
    ).fetchone()

    start_workers(1)
    async with registered(client, settlement_job(), task_queue):
        trigger(temporal.address)
        (first,) = await completed_runs(db, 1)
        assert first["result"]["counts"] == {
            "settled": 2500,
            "total_cents": expected_cents,
            "chunks": 3,
        }
        (batch,) = batches(db)
        assert (batch["job_name"], batch["scheduled_at"]) == (JOB, first["scheduled_at"])
        assert (batch["payment_count"], batch["total_cents"]) == (2500, expected_cents)
        assert batch["currency"] == "USD" and batch["closed_at"] is not None
        assert settled_by_batch(db) == {None: (10, 10_000), batch["id"]: (2500, expected_cents)}
        settled_at_before = db.execute(
            "SELECT id, settled_at FROM card_payments WHERE settlement_batch_id = %s ORDER BY id",
            (batch["id"],),
        ).fetchall()

        # Captured since: the next run settles those and nothing of the first batch again.
        capture(db, 40, timedelta(seconds=1))
        wait_until(first["scheduled_at"] + timedelta(seconds=1))  # a slot of its own
        # The CLI's trigger has overlap skip: it starts nothing while the first run is open.
        await runs_closed(client, JOB, [first["scheduled_at"]])
        trigger(temporal.address)
        first_again, second = await completed_runs(db, 2)
        assert first_again == first
        assert second["result"]["counts"]["settled"] == 40
        old, new = batches(db)
        assert old == batch
        assert new["scheduled_at"] == second["scheduled_at"] and new["payment_count"] == 40
        assert (
            db.execute(
                "SELECT id, settled_at FROM card_payments"
                " WHERE settlement_batch_id = %s ORDER BY id",
                (batch["id"],),
            ).fetchall()
            == settled_at_before
        )
        # The EUR payments and the ones captured after both slots are still captured.
        assert db.execute(
            "SELECT currency, count(*) FROM card_payments WHERE status = 'captured'"
            " GROUP BY 1 ORDER BY 1"
        ).fetchall() == [("EUR", 5), ("USD", 7)]
        start = first["scheduled_at"]
        await audited(client, database_url, task_queue, [settlement_job()], start=start)


async def test_a_run_started_after_its_deadline_is_skipped_and_settles_nothing(
    client, db, task_queue, start_workers
):
    capture(db, 50, MINUTE)
    # Registered while no worker polls: its one fire time starts a workflow nobody runs yet.
    job, fire = await fire_once(
        client, settlement_job(starting_deadline=timedelta(seconds=2)), task_queue
    )
    try:
        await fired(client, job.id, fire)
        wait_until(fire + timedelta(seconds=5))  # the fleet comes back 5 s late
        start_workers(1)

        async def settled():
            rows = executions(db, JOB)
            assert rows and rows[0]["status"] != "running"
            return rows

        (row,) = await assert_eventually(settled, timeout=60)
        assert row["scheduled_at"] == fire
        assert row["status"] == "skipped"
        assert row["error"].startswith("missed starting deadline: started")
        assert batches(db) == []
        assert settled_by_batch(db) == {}
    finally:
        await client.get_schedule_handle(job.id).delete()


def attempt_of(run_id: str, attempt: int) -> ActivityEnvironment:
    """Temporal attempt `attempt` of the work activity of workflow run `run_id`."""
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info, workflow_run_id=run_id, activity_id="1", attempt=attempt
    )
    return env


async def test_a_retry_resumes_after_the_last_committed_chunk_and_a_stale_attempt_commits_nothing(
    pool, db
):
    capture(db, 2500, MINUTE)
    slot = datetime.now(UTC).replace(microsecond=0)
    claim = await ExecutionActivities(pool).claim_execution(
        ClaimInput(
            job_name=JOB,
            scheduled_at=slot,
            trigger="schedule",
            workflow_id=f"{JOB}-{slot:%Y-%m-%dT%H:%M:%SZ}",
            run_id="run-1",
        )
    )
    work = WorkInput(
        execution=ExecutionRef(execution_id=claim.execution_id, job_name=JOB, scheduled_at=slot),
        params={"chunk_size": 1000},
    )
    (settle,) = build_kind_activities([KINDS[JOB]], pool)

    # Attempt 1 is cancelled (its worker lost, say) after its first chunk committed.
    first = attempt_of("run-1", 1)
    first.on_heartbeat = lambda *details: first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first.run(settle, work)
    (row,) = executions(db, JOB)
    assert row["status"] == "running" and row["attempt"] == 1
    assert row["progress"]["counts"]["settled"] == 1000
    assert settled_by_batch(db) == {
        row["progress"]["cursor"]["batch_id"]: (1000, first_cents(db, 1000))
    }

    # Attempt 2 resumes after the first chunk and completes the batch.
    result = await attempt_of("run-1", 2).run(settle, work)
    assert result.counts["settled"] == 2500 and result.counts["chunks"] == 3
    (row,) = executions(db, JOB)
    assert row["status"] == "completed" and row["attempt"] == 2
    (batch,) = batches(db)
    assert batch["payment_count"] == 2500
    assert captured(db) == 0

    # Attempt 1, paused rather than gone, wakes up: its token is stale, nothing commits.
    # The new payments are captured at the slot, within the stale chunk's cutoff however
    # long the test took so far (a minute before now would pass it after two minutes, and
    # then the chunk would have had nothing to commit anyway).
    capture(db, 10, datetime.now(UTC) - slot)
    stale = Fence(claim.execution_id, token=1, progress=row["progress"])
    cursor = row["progress"]["cursor"] | {"after_id": 0, "upto_id": 2**62}  # the new ones too
    with pytest.raises(StaleAttemptError, match="attempt 1 is stale"):
        async with fenced(pool, stale) as conn:
            await settle_chunk(conn, cursor, slot + timedelta(minutes=1), 1000)
    assert captured(db) == 10
