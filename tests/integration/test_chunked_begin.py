"""A chunked run begun in its work activity (`activities.run.begin.begin_and_work`, the
invoice-reminders kind): the plan, the claim, the first chunk, its outbox rows and, when the
work ends there, the completion commit in ONE transaction; a run with more work saves the
first chunk's progress in it, and the work activity's fenced chunks resume from there."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from activities.common.models import ClaimInput, ExecutionRef, WorkInput, WorkResult
from activities.run.begin import BeginInput, BegunWork, WorkOrBegin
from activities.run.kinds import work_activity
from jobs import KINDS
from jobs.invoice_reminders.activities import InvoiceActivities
from tests.integration.jobs import assert_each_invoice_reminded_once, insert_invoices
from tests.integration.test_one_transaction import as_attempt

JOB = "invoice-reminders"
SLOT = datetime(2026, 12, 7, 2, 0, tzinfo=UTC)
OVERDUE = date(2026, 11, 20)
RUN_ID = "run-1"


def kind_activity(pool: AsyncConnectionPool):
    kind = KINDS[JOB]
    assert kind.chunked and kind.slot_work is None  # read from its work, no field set
    return work_activity(kind, InvoiceActivities(pool).send_invoice_reminders, None, pool)


async def begin(pool: AsyncConnectionPool, attempt: int = 1, chunk_size: int = 100) -> BegunWork:
    """The kind's work activity given the run's start, as attempt `attempt` of the run's
    first activity (a local one, in `LocalTransactionJobWorkflow`)."""
    claim = ClaimInput(
        job_name=JOB,
        scheduled_at=SLOT,
        origin="scheduled",
        workflow_id=f"{JOB}-{SLOT:%Y-%m-%dT%H:%M:%S}Z",
        run_id=RUN_ID,
    )
    begin = BeginInput(claim=claim, server_now=SLOT + timedelta(seconds=1))
    work = WorkOrBegin(begin=begin, params={"chunk_size": chunk_size})
    return await as_attempt(1, attempt).run(kind_activity(pool), work)


def rows(db: psycopg.Connection, sql: str) -> list[dict]:
    return db.cursor(row_factory=dict_row).execute(sql).fetchall()


async def test_a_run_whose_work_ends_in_its_first_chunk_is_one_transaction(db, pool):
    insert_invoices(db, 60, due=OVERDUE)
    done = await begin(pool)
    assert done.claim.outcome == "claimed" and not done.more and done.declined is None
    assert done.counts == {"reminded": 60, "queued": 60, "chunks": 1}
    (row,) = rows(db, "SELECT * FROM job_executions")
    # now() is the transaction's time: claimed (started_at) and completed in one.
    assert row["status"] == "completed" and row["started_at"] == row["finished_at"]
    assert row["attempt"] == 1 and row["result"] == {"counts": done.counts}
    journal = rows(db, "SELECT what, txid FROM commit_journal ORDER BY seq")
    outbox = {r["txid"] for r in rows(db, "SELECT txid FROM outbox_messages")}
    assert [j["what"] for j in journal] == ["take_over", "complete"]
    assert {j["txid"] for j in journal} == outbox
    assert_each_invoice_reminded_once(db, 60)

    # The next attempt of the same run (its predecessor's result lost) finds the slot
    # completed by this run: its counts stand, nothing is written.
    again = await begin(pool, attempt=2)
    assert again.already_completed and again.counts == done.counts and not again.more
    assert rows(db, "SELECT * FROM job_executions") == [row]
    assert len(rows(db, "SELECT 1 FROM commit_journal")) == 2


async def test_a_run_with_more_work_goes_on_from_its_first_chunk(db, pool):
    insert_invoices(db, 250, due=OVERDUE)
    first = await begin(pool)
    assert first.claim.outcome == "claimed" and first.more
    assert first.counts == {"reminded": 100, "queued": 100, "chunks": 1}
    (row,) = rows(db, "SELECT * FROM job_executions")
    assert row["status"] == "running" and row["progress"]["counts"] == first.counts
    assert [j["what"] for j in rows(db, "SELECT what FROM commit_journal")] == [
        "take_over",
        "chunk",
    ]

    # The attempt after one whose result was lost: the slot runs, its chunk stands, and
    # nothing more commits; the work activity goes on.
    again = await begin(pool, attempt=2)
    assert again.more and again.claim.execution_id == first.claim.execution_id
    assert rows(db, "SELECT * FROM job_executions") == [row]

    # The run's work activity (its second activity) takes over and resumes at chunk 2.
    execution = ExecutionRef(execution_id=row["id"], job_name=JOB, scheduled_at=SLOT)
    work = WorkInput(execution=execution, params={"chunk_size": 100})
    rest: WorkResult = await as_attempt(2, 1).run(kind_activity(pool), work)
    assert rest.counts == {"reminded": 250, "queued": 250, "chunks": 3}
    (done,) = rows(db, "SELECT * FROM job_executions")
    assert done["status"] == "completed" and done["attempt"] == 2
    assert_each_invoice_reminded_once(db, 250)
    whats = [j["what"] for j in rows(db, "SELECT what FROM commit_journal ORDER BY seq")]
    # (A fenced chunk journals as "chunk", the last one too, which completes the slot.)
    assert whats == ["take_over", "chunk", "take_over", "chunk", "chunk"]
