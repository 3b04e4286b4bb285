"""Work that fits in one transaction (`activities.chunked.run_in_one_transaction`, the
nightly-reconcile kind): the take-over, the work, its outbox rows, the journal and the
completion commit together, and the take-over order still refuses an older attempt."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import psycopg
import pytest
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool
from temporalio.testing import ActivityEnvironment

from activities.executions import Attempt, ExecutionActivities, StaleAttemptError, take_over
from activities.models import ClaimInput, ExecutionRef, WorkInput
from jobs.nightly_reconcile.activities import ReconcileActivities, ReconcileParams
from tests.integration.test_reconcile import AFTER_FALL_BACK, JOB, fall_back_day

RUN_ID = "run-1"


@pytest.fixture
async def pool(database_url):
    async with AsyncConnectionPool(database_url, min_size=1, max_size=4, open=False) as pool:
        await pool.wait()
        yield pool


async def claimed(pool: AsyncConnectionPool) -> ExecutionRef:
    claim = await ExecutionActivities(pool).claim_execution(
        ClaimInput(
            job_name=JOB,
            scheduled_at=AFTER_FALL_BACK,
            origin="backfill",
            workflow_id=f"{JOB}-{AFTER_FALL_BACK:%Y-%m-%dT%H:%M:%S}Z",
            run_id=RUN_ID,
        )
    )
    return ExecutionRef(execution_id=claim.execution_id, job_name=JOB, scheduled_at=AFTER_FALL_BACK)


def as_attempt(activity_seq: int, number: int) -> ActivityEnvironment:
    """An activity environment whose running activity is `number` of `activity_seq`."""
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info,
        activity_id=str(activity_seq),
        attempt=number,
        workflow_run_id=RUN_ID,
        current_attempt_scheduled_time=datetime.now(UTC),
    )
    return env


async def reconcile(pool: AsyncConnectionPool, execution: ExecutionRef, env: ActivityEnvironment):
    work = WorkInput(execution=execution, params={"threshold_cents": 100})
    params = ReconcileParams(threshold_cents=100)
    return await env.run(ReconcileActivities(pool).reconcile_ledger, work, params)


def rows(db: psycopg.Connection, sql: str, *args) -> list[dict]:
    return db.cursor(row_factory=dict_row).execute(sql, args).fetchall()


async def test_take_over_work_outbox_journal_and_completion_are_one_transaction(db, pool):
    fall_back_day(db)
    execution = await claimed(pool)
    result = await reconcile(pool, execution, as_attempt(5, 1))
    assert result.counts["alerts"] == 1 and not result.already_completed

    journal = rows(
        db,
        "SELECT what, attempt, status, txid FROM commit_journal WHERE execution_id = %s"
        " ORDER BY seq",
        execution.execution_id,
    )
    assert [(j["what"], j["attempt"], j["status"]) for j in journal] == [
        ("take_over", 1, "running"),
        ("complete", 1, "completed"),
    ]
    (alert,) = rows(
        db,
        "SELECT execution_id, attempt, txid FROM outbox_messages"
        " WHERE type = 'ReconciliationAlert'",
    )
    assert (alert["execution_id"], alert["attempt"]) == (execution.execution_id, 1)
    assert {j["txid"] for j in journal} == {alert["txid"]}  # one transaction, all of it

    # Another attempt finds the slot completed and does nothing.
    again = await reconcile(pool, execution, as_attempt(5, 2))
    assert again.already_completed and again.counts == result.counts
    assert len(rows(db, "SELECT 1 FROM commit_journal")) == 2


async def test_an_older_attempt_is_refused_and_commits_nothing(db, pool):
    fall_back_day(db)
    execution = await claimed(pool)
    # Temporal attempt 3 of activity 5 holds the slot (taken over in a transaction of its
    # own, as a chunked attempt of the previous release does); attempt 2 wakes up late.
    holder = Attempt(claim_run_id=RUN_ID, run_id=RUN_ID, activity_seq=5, number=3)
    await take_over(pool, execution.execution_id, holder)
    with pytest.raises(StaleAttemptError, match="holds the slot"):
        await reconcile(pool, execution, as_attempt(5, 2))
    assert rows(db, "SELECT * FROM reconciliations") == []
    assert rows(db, "SELECT * FROM outbox_messages") == []
    (row,) = rows(db, "SELECT attempt, status FROM job_executions")
    assert (row["attempt"], row["status"]) == (1, "running")

    # The holder's next attempt takes over and completes, alone.
    result = await reconcile(pool, execution, as_attempt(5, 4))
    assert result.counts["alerts"] == 1
    (row,) = rows(db, "SELECT attempt, status FROM job_executions")
    assert (row["attempt"], row["status"]) == (2, "completed")
