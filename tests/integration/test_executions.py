"""The execution record against real Postgres: claims, fencing tokens, deadlines."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from activities.chunks.chunked import fenced
from activities.claim.executions import Attempt, ExecutionActivities, StaleAttemptError, take_over
from activities.common.models import AttemptQuery, ClaimInput, FailureInput
from jobs.invoice_reminders.activities import remind_chunk, reminder_window
from tests.integration.jobs import executions, insert_invoices, outbox_count

SLOT = datetime(2026, 11, 20, 2, 30, tzinfo=UTC)


def claim_input(**overrides) -> ClaimInput:
    fields = {
        "job_name": "invoice-reminders",
        "scheduled_at": SLOT,
        "trigger": "schedule",
        "workflow_id": "invoice-reminders-2026-11-20T02:30:00Z",
        "run_id": "run-1",
    }
    return ClaimInput(**(fields | overrides))


async def test_a_stale_fencing_token_commits_nothing(pool, db):
    insert_invoices(db, 3000, due=date(2026, 11, 1))
    claim = await ExecutionActivities(pool).claim_execution(claim_input())
    stale = await take_over(pool, claim.execution_id)
    current = await take_over(pool, claim.execution_id)
    assert (stale.token, current.token) == (1, 2)
    window = reminder_window("invoice-reminders", SLOT, 7)

    with pytest.raises(StaleAttemptError, match="attempt 1 is stale"):
        async with fenced(pool, stale) as conn:
            await remind_chunk(conn, window, 0, 3000)
    assert outbox_count(db) == 0
    assert (
        db.execute("SELECT count(*) FROM invoices WHERE last_reminder_at IS NOT NULL").fetchone()[0]
        == 0
    )

    async with fenced(pool, current) as conn:
        assert await remind_chunk(conn, window, 0, 3000) == (3000, 3000)
    assert outbox_count(db) == 3000


async def test_a_completed_slot_is_a_recorded_no_op(pool, db):
    activities = ExecutionActivities(pool)
    claim = await activities.claim_execution(claim_input())
    fence = await take_over(pool, claim.execution_id)
    async with fenced(pool, fence) as conn:
        await fence.complete(conn, {"counts": {"reminded": 0}}, {"counts": {"reminded": 0}})

    again = await activities.claim_execution(claim_input(run_id="run-2"))
    assert again.outcome == "completed"
    assert again.execution_id == claim.execution_id
    (row,) = executions(db, "invoice-reminders")
    assert row["duplicate_runs"] == 1 and row["status"] == "completed"
    # A completed slot cannot be taken over again.
    assert await take_over(pool, claim.execution_id) == ("completed", {"counts": {"reminded": 0}})


async def test_a_failed_slot_is_claimed_again_and_only_its_holder_marks_it_failed(pool, db):
    activities = ExecutionActivities(pool)
    first = await activities.claim_execution(claim_input())
    await activities.record_failure(
        FailureInput(execution_id=first.execution_id, run_id="run-1", error="boom")
    )
    assert executions(db, "invoice-reminders")[0]["status"] == "failed"

    retry = await activities.claim_execution(claim_input(run_id="run-2"))
    assert retry.outcome == "claimed"
    (row,) = executions(db, "invoice-reminders")
    assert (row["status"], row["error"], row["run_id"]) == ("running", None, "run-2")

    # The first run no longer holds the slot: its late failure report changes nothing.
    await activities.record_failure(
        FailureInput(execution_id=first.execution_id, run_id="run-1", error="late")
    )
    assert executions(db, "invoice-reminders")[0]["status"] == "running"


@pytest.mark.parametrize(
    ("late_by", "outcome"), [(timedelta(seconds=29), "claimed"), (timedelta(seconds=31), "skipped")]
)
async def test_starting_deadline_is_judged_against_the_clock(pool, db, late_by, outcome):
    activities = ExecutionActivities(pool, clock=lambda: SLOT + late_by)
    claim = await activities.claim_execution(claim_input(starting_deadline_seconds=30))
    assert claim.outcome == outcome
    (row,) = executions(db, "invoice-reminders")
    assert row["status"] == ("running" if outcome == "claimed" else "skipped")
    if outcome == "skipped":
        assert "missed starting deadline" in row["error"]
        assert row["finished_at"] is not None


async def test_take_overs_are_ordered_by_run_activity_and_temporal_attempt(pool, db):
    activities = ExecutionActivities(pool)
    claim = await activities.claim_execution(claim_input())

    def attempt(number: int, seq: int = 1, run_id: str = "run-1") -> Attempt:
        return Attempt(claim_run_id=run_id, run_id=run_id, activity_seq=seq, number=number)

    # Temporal attempt 4 takes the slot over; attempts 2 and 3, woken later, are refused.
    live = await take_over(pool, claim.execution_id, attempt(4))
    for old in (2, 3):
        with pytest.raises(StaleAttemptError, match=f"attempt {old} of activity 1 is stale"):
            await take_over(pool, claim.execution_id, attempt(old))
    (row,) = executions(db, "invoice-reminders")
    assert row["attempt"] == live.token == 1
    # A later activity of the same run (a new series) takes over from any attempt of an
    # earlier one; its own retries follow; the earlier activity can no longer.
    series = await take_over(pool, claim.execution_id, attempt(1, seq=3))
    assert series.token == 2
    assert (await take_over(pool, claim.execution_id, attempt(2, seq=3))).token == 3
    with pytest.raises(StaleAttemptError, match="attempt 5 of activity 1 is stale"):
        await take_over(pool, claim.execution_id, attempt(5))
    # An activity of a workflow run that no longer holds the claim is refused.
    with pytest.raises(StaleAttemptError, match="claimed by workflow run run-1"):
        await take_over(pool, claim.execution_id, attempt(9, seq=9, run_id="run-0"))
    await activities.claim_execution(claim_input(run_id="run-2"))  # passes to the newer run
    with pytest.raises(StaleAttemptError, match="claimed by workflow run run-2"):
        await take_over(pool, claim.execution_id, attempt(3, seq=3))
    assert (await take_over(pool, claim.execution_id, attempt(1, run_id="run-2"))).token == 4

    # Whether an attempt reached the database: the last one that took over did.
    def query(number: int, seq: int = 1, run_id: str = "run-2") -> AttemptQuery:
        return AttemptQuery(
            execution_id=claim.execution_id, run_id=run_id, activity_seq=seq, attempt=number
        )

    assert await activities.attempt_took_over(query(1))
    assert not await activities.attempt_took_over(query(2))
    assert not await activities.attempt_took_over(query(1, seq=3))


async def test_fenced_transactions_leave_evidence_of_their_attempt(pool, db):
    """Each outbox row names the execution and attempt that wrote it, and the journal
    lists take-overs and fenced commits in order, in the same transactions (issue 18)."""
    insert_invoices(db, 3, due=date(2026, 11, 1))
    claim = await ExecutionActivities(pool).claim_execution(claim_input())
    fence = await take_over(pool, claim.execution_id)
    window = reminder_window("invoice-reminders", SLOT, 7)
    async with fenced(pool, fence, what="chunk") as conn:
        await remind_chunk(conn, window, 0, 3)
        await fence.complete(conn, {"counts": {}}, {"counts": {}})
    with pytest.raises(StaleAttemptError):
        async with fenced(pool, fence) as conn:
            await remind_chunk(conn, window, 0, 3)

    rows = db.execute("SELECT execution_id, attempt, txid FROM outbox_messages").fetchall()
    assert {(r[0], r[1]) for r in rows} == {(claim.execution_id, 1)} and len(rows) == 3
    journal = db.execute(
        "SELECT attempt, what, status, txid FROM commit_journal WHERE execution_id = %s "
        "ORDER BY seq",
        (claim.execution_id,),
    ).fetchall()
    assert [j[:3] for j in journal] == [(1, "take_over", "running"), (1, "chunk", "completed")]
    assert journal[1][3] == rows[0][2]  # the outbox rows' transaction is the chunk's


async def test_outbox_rows_of_other_producers_name_no_execution(db):
    db.execute(
        "INSERT INTO outbox_messages (type, payload, idempotency_key) VALUES ('T', '{}', 'k')"
    )
    assert db.execute("SELECT execution_id, attempt FROM outbox_messages").fetchone() == (
        None,
        None,
    )
