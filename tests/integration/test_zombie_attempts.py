"""Attempts a frozen worker absorbed: they never take the slot back, never use up the run.

The server hands an activity retry to any open poll, a frozen (SIGSTOPped) worker's too:
the retries time out there without running, and start, long timed out, when the process
wakes. Each test freezes the slot's holder while it is the only worker polling, so the
retries that follow land in its open polls, however fast or slow the machine; a second
worker is started only once the server shows that they did. Every run waits at the test's
chunk gate (`tests/integration/chunk_gate.py`) before each chunk, so nothing finishes before
the test lets it.
"""

from __future__ import annotations

import signal
from datetime import date, timedelta

from temporalio.api.enums.v1 import PendingActivityState
from temporalio.worker import Replayer

from core.payloads import data_converter
from jobs import kind_workflows
from tests.helpers import assert_eventually, wait_for_text
from tests.helpers.audit import audit_report, one_slot
from tests.integration.jobs import (
    assert_each_invoice_reminded_once,
    executions,
    insert_invoices,
    invoice_job,
    registered,
    takeover_retry,
)
from worker.run import workflow_runner
from workflows import ChunkedJobWorkflow, ScheduledJobWorkflow

OVERDUE = date.today() - timedelta(days=10)
HEARTBEAT = timedelta(seconds=3)
# Text of `StaleAttemptError.refused`: an older attempt asked to take the slot over.
REFUSED = "is stale (Temporal attempt"


def the_row(db, job_id: str) -> dict:
    (row,) = executions(db, job_id)
    return row


def holder_pid(row: dict) -> int:
    return int(row["holder"].rsplit(":", 1)[1])


async def pending_work(run, activity: str):
    """The run's pending work activity, as the server describes it."""
    pending = (await run.describe()).raw_description.pending_activities
    works = [p for p in pending if p.activity_type.name == activity]
    assert len(works) == 1, pending
    return works[0]


async def audit_clean(client, database_url: str, job, task_queue: str, row: dict) -> None:
    """`schedules audit` judges the slot's whole history clean: nothing lost, doubled,
    written by a stale attempt, or left running."""
    slot = row["scheduled_at"]
    report = await audit_report(client, database_url, task_queue, [job], **one_slot(slot))
    assert report.exit_code == 0, report.findings
    assert report.rows == 1, report


async def completed(db, job_id: str) -> dict:
    async def done():
        row = the_row(db, job_id)
        assert row["status"] == "completed", row["status"]
        return row

    return await assert_eventually(done, timeout=120)


async def test_a_frozen_worker_woken_after_a_takeover_never_takes_the_slot_back(
    client, db, database_url, task_queue, start_workers, gate
):
    total = 4_000
    insert_invoices(db, total, due=OVERDUE)
    # Three activity slots: the running attempt and two open polls to absorb retries.
    # Its PostgreSQL session outlives the freeze: it waits at the gate holding no row.
    env = {"WORKER_MAX_CONCURRENT_ACTIVITIES": "3", **gate.env}
    (frozen,) = start_workers(1, DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS="3600", **env)
    job = invoice_job(chunk_size=500, heartbeat=HEARTBEAT).model_copy(
        update={"retry": takeover_retry(20)}
    )
    async with registered(client, job, task_queue):
        await client.get_schedule_handle(job.id).trigger()
        await gate.reached()  # the begin did the first chunk, the work activity took over
        gate.step()
        await gate.reached()
        row = the_row(db, job.id)
        assert holder_pid(row) == frozen.pid and row["attempt"] == 2
        run = client.get_workflow_handle(row["workflow_id"])
        frozen.signal(signal.SIGSTOP)
        try:
            # Attempt 2 went to the frozen worker's open poll (the only one) and timed out.
            async def retried_past_the_frozen_worker():
                work = await pending_work(run, job.activity)
                assert work.attempt >= 3, work

            await assert_eventually(retried_past_the_frozen_worker, timeout=90, interval=0.1)
            (live,) = start_workers(1, **env)

            async def taken_over_by_the_live_worker():
                row = the_row(db, job.id)
                assert row["holder"] and holder_pid(row) == live.pid, row["holder"]
                return row

            taken = await assert_eventually(taken_over_by_the_live_worker, timeout=90)
            # Both wait at the gate: the frozen worker's attempt 1, and the live one's.
            await gate.reached(2)
        finally:
            frozen.signal(signal.SIGCONT)

        # Woken, the frozen worker starts the attempts it absorbed: each asks to take the
        # slot over, and is refused, however many take-overs happened since.
        wait_for_text(frozen.log, REFUSED, timeout=90)
        after = the_row(db, job.id)
        assert holder_pid(after) == live.pid and after["attempt"] == taken["attempt"]

        gate.open()
        done = await completed(db, job.id)
        result = await run.result()
        assert result["outcome"] == "completed", result
        assert done["attempt"] == taken["attempt"]
        assert done["result"]["counts"]["reminded"] == total
        assert_each_invoice_reminded_once(db, total)
        await audit_clean(client, database_url, job, task_queue, done)


async def test_a_frozen_worker_absorbing_every_retry_does_not_fail_the_run(
    client, db, database_url, task_queue, start_workers, gate
):
    total = 3_000
    insert_invoices(db, total, due=OVERDUE)
    attempts = 4
    # Four activity slots: the running attempt and three open polls, one for each retry.
    env = {"WORKER_MAX_CONCURRENT_ACTIVITIES": str(attempts), **gate.env}
    (frozen,) = start_workers(1, DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS="3600", **env)
    job = invoice_job(chunk_size=500, heartbeat=HEARTBEAT).model_copy(
        update={"retry": takeover_retry(attempts)}
    )
    async with registered(client, job, task_queue):
        await client.get_schedule_handle(job.id).trigger()
        await gate.reached()
        row = the_row(db, job.id)
        run = client.get_workflow_handle(row["workflow_id"])
        first = await pending_work(run, job.activity)
        frozen.signal(signal.SIGSTOP)
        try:
            # Attempts 2 to 4 land in the frozen worker's polls and time out: the activity's
            # retries are used up, none of them having run. A live worker started once the
            # last was handed out gets none of them.
            async def the_last_attempt_handed_to_the_frozen_worker():
                work = await pending_work(run, job.activity)
                assert work.activity_id == first.activity_id
                assert work.attempt == attempts, work
                assert work.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED

            await assert_eventually(
                the_last_attempt_handed_to_the_frozen_worker, timeout=120, interval=0.1
            )
            (live,) = start_workers(1, **env)

            # The run starts a new series of attempts, which the live worker takes.
            async def a_new_series():
                work = await pending_work(run, job.activity)
                assert work.activity_id != first.activity_id, work
                return work

            series = await assert_eventually(a_new_series, timeout=120, interval=0.1)
            assert series.attempt == 1

            async def taken_over_by_the_live_worker():
                row = the_row(db, job.id)
                assert row["holder"] and holder_pid(row) == live.pid, row["holder"]

            await assert_eventually(taken_over_by_the_live_worker, timeout=90)
            gate.open()
            done = await completed(db, job.id)
        finally:
            frozen.signal(signal.SIGCONT)

        assert done["holder"] is None
        result = await run.result()
        assert result["outcome"] == "completed", result
        assert done["result"]["counts"]["reminded"] == total
        assert_each_invoice_reminded_once(db, total)
        # The absorbed attempts, started late in the woken worker, commit nothing: refused,
        # or finding the slot completed (the server then refuses their completion).
        wait_for_text(frozen.log, (REFUSED, "Activity not found on completion"), timeout=90)
        assert the_row(db, job.id)["result"] == done["result"]
        assert_each_invoice_reminded_once(db, total)
        await audit_clean(client, database_url, job, task_queue, done)

        # The new series' path replays: a worker restarted mid-run would carry it on.
        replayer = Replayer(
            workflows=[ChunkedJobWorkflow, ScheduledJobWorkflow, *kind_workflows()],
            workflow_runner=workflow_runner(),
            data_converter=data_converter,
        )
        replayed = await replayer.replay_workflow(
            await run.fetch_history(), raise_on_replay_failure=False
        )
        assert replayed.replay_failure is None, replayed.replay_failure
