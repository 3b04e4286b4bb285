"""Faults lose nothing and duplicate nothing: killed, paused and stopped worker processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import date, timedelta

from tests.conftest import ROOT, settings_env
from tests.helpers import assert_eventually, wait_for_text
from tests.integration.jobs import (
    executions,
    insert_invoices,
    invoice_job,
    outbox_count,
    registered,
)

OVERDUE = date.today() - timedelta(days=10)


def holder_pid(db, job_id: str) -> int:
    (row,) = executions(db, job_id)
    return int(row["holder"].rsplit(":", 1)[1])


async def wait_for_chunks(db, job_id: str, at_least: int) -> dict:
    async def progressed():
        rows = executions(db, job_id)
        assert rows and rows[0]["progress"].get("counts", {}).get("chunks", 0) >= at_least
        return rows[0]

    return await assert_eventually(progressed, timeout=60, interval=0.02)


def assert_each_invoice_reminded_once(db, total: int) -> None:
    assert outbox_count(db) == total
    distinct = db.execute(
        "SELECT count(DISTINCT payload->>'invoice_number') FROM outbox_messages"
    ).fetchone()[0]
    assert distinct == total
    assert (
        db.execute("SELECT count(*) FROM invoices WHERE last_reminder_at IS NOT NULL").fetchone()[0]
        == total
    )


async def test_worker_killed_mid_run_another_replica_finishes(
    client, db, task_queue, start_workers
):
    total = 50_000
    insert_invoices(db, total, due=OVERDUE)
    workers = start_workers(3)
    job = invoice_job(chunk_size=1000, pause_between_chunks_ms=40)
    async with registered(client, job, task_queue):
        await client.get_schedule_handle(job.id).trigger()
        before_kill = await wait_for_chunks(db, job.id, at_least=5)
        victim = holder_pid(db, job.id)
        assert victim in {w.pid for w in workers}
        os.kill(victim, signal.SIGKILL)

        async def completed():
            (row,) = executions(db, job.id)
            assert row["status"] == "completed"
            return row

        row = await assert_eventually(completed, timeout=90)
        assert row["attempt"] >= 2, "a second attempt must have taken over"
        assert holder_pid is not None and row["holder"] is None
        assert row["result"]["counts"]["reminded"] == total
        # The retry resumed: it did not start again from the first chunk.
        assert row["result"]["counts"]["chunks"] == 50
        assert before_kill["progress"]["counts"]["chunks"] >= 5
        assert_each_invoice_reminded_once(db, total)


async def test_paused_worker_with_a_stale_token_commits_nothing(
    client, db, task_queue, start_workers, settings
):
    total = 20_000
    insert_invoices(db, total, due=OVERDUE)
    workers = start_workers(2)
    job = invoice_job(chunk_size=500, pause_between_chunks_ms=50)
    async with registered(client, job, task_queue):
        await client.get_schedule_handle(job.id).trigger()
        await wait_for_chunks(db, job.id, at_least=3)
        paused_pid = holder_pid(db, job.id)
        paused = next(w for w in workers if w.pid == paused_pid)
        paused.signal(signal.SIGSTOP)
        try:

            async def taken_over_and_completed():
                (row,) = executions(db, job.id)
                assert row["status"] == "completed"
                return row

            row = await assert_eventually(taken_over_and_completed, timeout=90)
            assert row["attempt"] == 2
            assert_each_invoice_reminded_once(db, total)
        finally:
            paused.signal(signal.SIGCONT)

        # The paused attempt wakes up holding token 1. Either its next chunk is refused by
        # the fence, or its heartbeat learns first that the attempt timed out; both ways it
        # must commit nothing.
        wait_for_text(paused.log, ("attempt 1 is stale", "Activity cancelled"), timeout=60)
        (after,) = executions(db, job.id)
        assert after["status"] == "completed" and after["attempt"] == 2
        assert after["result"] == row["result"]
        assert_each_invoice_reminded_once(db, total)


async def test_sigterm_drains_the_running_activity_and_exits_zero(
    client, db, task_queue, start_workers
):
    total = 6_000
    insert_invoices(db, total, due=OVERDUE)
    (worker,) = start_workers(1)
    job = invoice_job(chunk_size=500, pause_between_chunks_ms=100)
    async with registered(client, job, task_queue):
        await client.get_schedule_handle(job.id).trigger()
        await wait_for_chunks(db, job.id, at_least=2)
        worker.signal(signal.SIGTERM)
        assert worker.process.wait(60) == 0
        (row,) = executions(db, job.id)
        # The in-flight attempt finished inside the grace period: no retry was needed.
        assert row["status"] == "completed"
        assert row["attempt"] == 1
        assert_each_invoice_reminded_once(db, total)


async def test_health_command_reports_a_polling_worker_on_this_host(settings, start_workers):
    env = settings_env(settings)
    probe = [sys.executable, "-m", "worker", "health"]
    before = subprocess.run(probe, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert before.returncode == 1, before.stdout + before.stderr
    start_workers(1)

    async def healthy():
        done = subprocess.run(probe, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    await assert_eventually(healthy, timeout=30)
