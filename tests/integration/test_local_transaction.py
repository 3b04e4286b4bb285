"""A run whose one transaction is a local activity (`LocalTransactionJobWorkflow`), and the
worker that runs it frozen in the middle of that transaction.

The local activity runs in the run's workflow task. A worker stopped inside the transaction
(a SIGSTOPped process, a paused VM) holds the task past its timeout, and the slot's row,
inserted by the claim but not committed, until PostgreSQL ends its idle session. The server
hands the task to another worker, whose attempt waits on that row and then claims the slot
afresh; the frozen worker, woken, commits nothing.
"""

from __future__ import annotations

import json
import signal
from datetime import date

import psycopg
from temporalio.api.enums.v1 import EventType

from tests.helpers import assert_eventually, wait_for_text
from tests.helpers.audit import audited, one_slot
from tests.integration.jobs import executions, registered, waiting_on
from tests.integration.test_reconcile import (
    AFTER_FALL_BACK,
    alerts,
    backfill,
    book,
    reconcile_job,
    reconciliations,
    settle,
)


def local_activities(history) -> list[str]:
    """The activity types of the local activities recorded in `history`, in order."""
    return [
        json.loads(e.marker_recorded_event_attributes.details["data"].payloads[0].data)[
            "activity_type"
        ]
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
        and e.marker_recorded_event_attributes.marker_name == "core_local_activity"
    ]


def journal(db: psycopg.Connection, execution_id: int) -> list[tuple[int, str]]:
    return db.execute(
        "SELECT attempt, what FROM commit_journal WHERE execution_id = %s ORDER BY seq",
        (execution_id,),
    ).fetchall()


async def test_a_worker_frozen_in_a_runs_transaction_loses_the_run_and_commits_nothing(
    client, db, database_url, task_queue, start_workers
):
    # The night reconciled is 2026-11-01 in New York: $10.00 booked, $5.00 settled, an alert.
    book(db, 1000, date(2026, 11, 1))
    settle(db, 500, "2026-11-01T12:00:00-05:00")
    job = reconcile_job("reconcile-frozen")
    # Its PostgreSQL session ends 6 s into a frozen transaction.
    idle = {"DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS": "6"}
    (frozen,) = start_workers(1, **idle)
    async with registered(client, job, task_queue):
        with psycopg.connect(database_url) as lock:
            # The run's statement that stores the night queues behind this lock, in the
            # transaction that has inserted the slot's row (the claim) already.
            lock.execute("LOCK TABLE reconciliations IN EXCLUSIVE MODE")
            await backfill(client, job.id, AFTER_FALL_BACK)

            async def queued():
                assert waiting_on(db, "reconciliations")

            await assert_eventually(queued, timeout=60, interval=0.05)
            frozen.signal(signal.SIGSTOP)
            try:
                # The statement goes through; its worker, stopped, never sends the next.
                lock.rollback()
                start_workers(1, **idle)

                async def completed():
                    rows = executions(db, job.id)
                    assert [r["status"] for r in rows] == ["completed"], rows
                    return rows[0]

                done = await assert_eventually(completed, timeout=120)
            finally:
                frozen.signal(signal.SIGCONT)

        run = client.get_workflow_handle(done["workflow_id"])
        await run.result()
        history = await run.fetch_history()
        types = [e.event_type for e in history.events]
        # The work ran in workflow tasks, never through the server: the frozen worker's
        # task timed out, the other's recorded the work's result.
        assert EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED not in types
        assert EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT in types
        assert local_activities(history) == [job.activity, "backfill_skips"]

        # Once: the other worker's claim (token 1: the frozen one's rolled back), one stored
        # night, one alert, one take-over and one completion in the journal.
        assert done["attempt"] == 1
        assert done["result"]["counts"] == {
            "ledger_total": 1000,
            "payments_total": 500,
            "discrepancy": 500,
            "stored": 1,
            "alerts": 1,
        }
        assert journal(db, done["id"]) == [(1, "take_over"), (1, "complete")]
        (night,) = reconciliations(db)
        assert (night["ledger_total"], night["payments_total"]) == (1000, 500)
        assert len(alerts(db)) == 1

        # Woken, the frozen worker finds its session ended: nothing more is committed.
        wait_for_text(
            frozen.log,
            ("terminating connection", "consuming input failed", "server closed the connection"),
            timeout=60,
        )
        (after,) = executions(db, job.id)
        assert (after["status"], after["attempt"], after["result"]) == (
            "completed",
            1,
            done["result"],
        )
        assert journal(db, done["id"]) == [(1, "take_over"), (1, "complete")]
        assert len(reconciliations(db)) == 1 and len(alerts(db)) == 1

        await audited(client, database_url, task_queue, [job], **one_slot(AFTER_FALL_BACK))
