"""Work that fits in one transaction (the nightly-reconcile kind): the take-over, the work,
its outbox rows, the journal and the completion commit together
(`activities.chunks.chunked.run_in_one_transaction`), and a run that begins in its work activity
plans and claims in that transaction too (`activities.run.begin.begin_and_work`); the take-over
order still refuses an older attempt, which commits nothing."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import psycopg
import pytest
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool
from temporalio.testing import ActivityEnvironment

from activities.claim.executions import Attempt, ExecutionActivities, StaleAttemptError, take_over
from activities.common.models import ClaimInput, ExecutionRef, WorkInput
from activities.run.begin import BeginInput, WorkOrBegin
from activities.run.kinds import work_activity
from jobs import KINDS
from jobs.nightly_reconcile.activities import ReconcileActivities, ReconcileParams
from tests.integration.test_reconcile import AFTER_FALL_BACK, JOB, fall_back_day

RUN_ID = "run-1"


def claim_input(run_id: str = RUN_ID) -> ClaimInput:
    return ClaimInput(
        job_name=JOB,
        scheduled_at=AFTER_FALL_BACK,
        origin="backfill",
        workflow_id=f"{JOB}-{AFTER_FALL_BACK:%Y-%m-%dT%H:%M:%S}Z",
        run_id=run_id,
    )


async def claimed(pool: AsyncConnectionPool, run_id: str = RUN_ID) -> ExecutionRef:
    claim = await ExecutionActivities(pool).claim_execution(claim_input(run_id))
    return ExecutionRef(execution_id=claim.execution_id, job_name=JOB, scheduled_at=AFTER_FALL_BACK)


def as_attempt(activity_seq: int, number: int, run_id: str = RUN_ID) -> ActivityEnvironment:
    """An activity environment whose running activity is `number` of `activity_seq` of
    workflow run `run_id`."""
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info,
        activity_id=str(activity_seq),
        attempt=number,
        workflow_run_id=run_id,
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


async def held_by(pool: AsyncConnectionPool, activity_seq: int, number: int) -> ExecutionRef:
    """The slot claimed by this run and taken over (in a transaction of its own, as a
    chunked attempt does) by Temporal attempt `number` of activity `activity_seq`."""
    execution = await claimed(pool)
    holder = Attempt(claim_run_id=RUN_ID, run_id=RUN_ID, activity_seq=activity_seq, number=number)
    await take_over(pool, execution.execution_id, holder)
    return execution


def committed_nothing(db: psycopg.Connection) -> None:
    """No work, no outbox row, and the slot as its holder left it."""
    assert rows(db, "SELECT * FROM reconciliations") == []
    assert rows(db, "SELECT * FROM outbox_messages") == []
    (row,) = rows(db, "SELECT attempt, status FROM job_executions")
    assert (row["attempt"], row["status"]) == (1, "running")


async def test_an_older_attempt_is_refused_and_commits_nothing(db, pool):
    fall_back_day(db)
    # Temporal attempt 3 of activity 5 holds the slot; attempt 2 wakes up late.
    execution = await held_by(pool, 5, 3)
    with pytest.raises(StaleAttemptError, match="holds the slot"):
        await reconcile(pool, execution, as_attempt(5, 2))
    committed_nothing(db)

    # The holder's next attempt takes over and completes, alone.
    result = await reconcile(pool, execution, as_attempt(5, 4))
    assert result.counts["alerts"] == 1
    (row,) = rows(db, "SELECT attempt, status FROM job_executions")
    assert (row["attempt"], row["status"]) == (2, "completed")


async def begin_and_reconcile(
    pool: AsyncConnectionPool, env: ActivityEnvironment, claim: ClaimInput | None = None
):
    """The kind's work activity given the run's start (no plan: the run's own slot only)."""
    owner = ReconcileActivities(pool)
    run = work_activity(KINDS[JOB], owner.reconcile_ledger, owner.reconcile_in, pool)
    begin = BeginInput(claim=claim or claim_input(), server_now=datetime.now(UTC))
    return await env.run(run, WorkOrBegin(begin=begin, params={"threshold_cents": 100}))


async def test_a_run_begun_in_its_work_claims_works_and_completes_in_one_transaction(db, pool):
    fall_back_day(db)
    result = await begin_and_reconcile(pool, as_attempt(1, 1))
    assert result.declined is None and result.claim.outcome == "claimed"
    assert result.counts["alerts"] == 1 and not result.already_completed
    (row,) = rows(db, "SELECT * FROM job_executions")
    # now() is the transaction's time: inserted (started_at) and completed in one.
    assert row["status"] == "completed" and row["started_at"] == row["finished_at"]
    assert (row["id"], row["attempt"], row["duplicate_runs"]) == (result.claim.execution_id, 1, 0)
    journal = rows(db, "SELECT what, txid FROM commit_journal ORDER BY seq")
    (alert,) = rows(db, "SELECT txid FROM outbox_messages WHERE type = 'ReconciliationAlert'")
    assert [j["what"] for j in journal] == ["take_over", "complete"]
    assert {j["txid"] for j in journal} == {alert["txid"]}

    # The next attempt of the same run (its predecessor's result lost) finds the slot
    # completed by this run: its counts stand, nothing is written, no duplicate counted.
    again = await begin_and_reconcile(pool, as_attempt(1, 2))
    assert again.already_completed and again.counts == result.counts
    assert again.claim.execution_id == result.claim.execution_id
    assert rows(db, "SELECT * FROM job_executions") == [row]
    assert len(rows(db, "SELECT 1 FROM commit_journal")) == 2


async def test_an_attempt_woken_after_its_run_claimed_with_begin_run_commits_nothing(db, pool):
    fall_back_day(db)
    # The run's begin_run claimed the slot after the work activity ended (it declined, or
    # failed for good), and its work took the slot over: an attempt of the first activity
    # woken now (a frozen worker) is refused.
    await held_by(pool, 2, 1)
    with pytest.raises(StaleAttemptError, match="claimed it after this activity ended"):
        await begin_and_reconcile(pool, as_attempt(1, 2))
    committed_nothing(db)


async def test_a_slot_of_another_run_is_left_alone_by_a_run_begun_in_its_work(db, pool):
    fall_back_day(db)
    other = await claimed(pool, run_id="run-0")
    done = await reconcile(pool, other, as_attempt(1, 1, run_id="run-0"))
    before = rows(db, "SELECT * FROM job_executions")
    result = await begin_and_reconcile(pool, as_attempt(1, 1))
    # Declined, nothing committed: the workflow begins with begin_run, which counts the
    # duplicate as any run of a completed slot does.
    assert result.declined and result.claim is None and not result.counts
    assert rows(db, "SELECT * FROM job_executions") == before
    assert before[0]["status"] == "completed" and done.counts["alerts"] == 1
    assert len(rows(db, "SELECT 1 FROM outbox_messages")) == 1


async def test_a_run_begun_in_its_work_past_its_starting_deadline_is_skipped_once(db, pool):
    fall_back_day(db)
    late = claim_input().model_copy(update={"starting_deadline_seconds": 60})
    result = await begin_and_reconcile(pool, as_attempt(1, 1), late)
    assert result.claim.outcome == "skipped" and result.claim.reason.startswith("missed")
    (row,) = rows(db, "SELECT status, attempt, error FROM job_executions")
    assert (row["status"], row["attempt"]) == ("skipped", 0)
    # A later attempt of the same run finds its skip, and writes nothing.
    again = await begin_and_reconcile(pool, as_attempt(1, 2), late)
    assert again.claim.outcome == "skipped" and again.claim.reason == row["error"]
    assert rows(db, "SELECT * FROM reconciliations") == []
    assert rows(db, "SELECT * FROM commit_journal") == []
