"""A frozen holder of the execution row costs the run one attempt, never its retries."""

from __future__ import annotations

import signal
from datetime import date, timedelta

import psycopg
from temporalio.api.enums.v1 import EventType, PendingActivityState

from tests.helpers import assert_eventually, wait_for_text
from tests.integration.jobs import (
    executions,
    insert_invoices,
    invoice_job,
    outbox_count,
    registered,
    takeover_retry,
    waiting_on,
)

HEARTBEAT = timedelta(seconds=2)


async def test_a_frozen_holder_of_the_row_lock_never_costs_the_run_its_retries(
    client, db, database_url, task_queue, start_workers
):
    total = 40_000
    insert_invoices(db, total, due=date.today() - timedelta(days=10))
    # One activity slot each: a stopped worker has no activity poll outstanding, so the
    # retry goes to the other one. Its PostgreSQL session ends 6 s into a frozen transaction.
    workers = start_workers(
        2, WORKER_MAX_CONCURRENT_ACTIVITIES="1", DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS="6"
    )
    job = invoice_job(chunk_size=500, pause_between_chunks_ms=100).model_copy(
        update={
            "heartbeat": HEARTBEAT,
            "retry": takeover_retry(3),
        }
    )
    async with registered(client, job, task_queue):
        await client.get_schedule_handle(job.id).trigger()

        async def chunks_done():
            rows = executions(db, job.id)
            assert rows and rows[0]["progress"].get("counts", {}).get("chunks", 0) >= 3
            return rows[0]

        row = await assert_eventually(chunks_done, timeout=60, interval=0.05)
        frozen_pid = int(row["holder"].rsplit(":", 1)[1])
        frozen = next(w for w in workers if w.pid == frozen_pid)

        # Hold the row as a frozen attempt would: the holder's next chunk queues behind
        # this lock; then the holder itself is stopped, its statement in the queue.
        with psycopg.connect(database_url) as lock:
            lock.execute("SELECT 1 FROM job_executions WHERE id = %s FOR UPDATE", (row["id"],))

            async def holder_queued():
                assert waiting_on(db, "job_executions")

            await assert_eventually(holder_queued, timeout=30, interval=0.05)
            frozen.signal(signal.SIGSTOP)
            try:
                run = client.get_workflow_handle(row["workflow_id"])

                # The retry on the other worker waits for the row, heartbeating: Temporal
                # sees it alive for three heartbeat timeouts and more.
                async def retry_alive_while_waiting():
                    pending = (await run.describe()).raw_description.pending_activities
                    works = [p for p in pending if p.activity_type.name == job.activity]
                    assert len(works) == 1, pending
                    (work,) = works
                    # Started, so these times are its own, not the frozen attempt's.
                    assert (
                        work.attempt == 2
                        and work.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
                    )
                    alive = (
                        work.last_heartbeat_time.ToDatetime() - work.last_started_time.ToDatetime()
                    )
                    assert alive >= 3 * HEARTBEAT

                await assert_eventually(retry_alive_while_waiting, timeout=60)
                lock.rollback()  # the frozen holder's statement takes the lock, and keeps it

                async def completed():
                    (done,) = executions(db, job.id)
                    assert done["status"] == "completed"
                    return done

                done = await assert_eventually(completed, timeout=90)
            finally:
                frozen.signal(signal.SIGCONT)

        # Three tokens: the begin's (which did the first chunk with the claim), the frozen
        # attempt's, and the one that waited it out and finished.
        assert done["attempt"] == 3
        history = await run.fetch_history()
        started = [
            e.activity_task_started_event_attributes.attempt
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        ]
        # Through the server only the work (the run begins in a local activity), whose
        # retried attempt records one started event: the second.
        assert started == [2]
        assert done["result"]["counts"]["reminded"] == total
        assert outbox_count(db) == total
        distinct = db.execute(
            "SELECT count(DISTINCT payload->>'invoice_number') FROM outbox_messages"
        )
        assert distinct.fetchone()[0] == total

        # The frozen attempt, woken, finds its session ended or its token stale: nothing more.
        wait_for_text(
            frozen.log,
            (
                "attempt 2 is stale",
                "Activity cancelled",
                "terminating connection",
                "consuming input failed",
            ),
            timeout=60,
        )
        (after,) = executions(db, job.id)
        assert after["attempt"] == 3 and after["result"] == done["result"]
        assert outbox_count(db) == total
