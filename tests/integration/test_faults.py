"""Faults lose nothing and duplicate nothing: killed, paused and stopped worker processes.

Each signal lands while the run waits before its next chunk at the test's chunk gate
(`tests/integration/chunk_gate.py`), so the run is still working when it arrives, however
slow the machine. The job's schedule is paused: only the test's trigger starts a run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import date, timedelta

from tests.helpers import ROOT, assert_eventually, wait_for_text
from tests.helpers.worker import settings_env
from tests.integration.jobs import (
    assert_each_invoice_reminded_once,
    executions,
    insert_invoices,
    invoice_job,
    registered,
)

OVERDUE = date.today() - timedelta(days=10)
# A short heartbeat timeout: a killed or frozen worker's attempt times out soon and another
# replica takes over. (On a busy machine a live attempt may time out too: that only adds an
# attempt, which the assertions allow.)
TAKEOVER = {"heartbeat": timedelta(seconds=3)}


def holder_pid(db, job_id: str) -> int:
    (row,) = executions(db, job_id)
    return int(row["holder"].rsplit(":", 1)[1])


def chunks_done(db, job_id: str) -> int:
    (row,) = executions(db, job_id)
    return row["progress"].get("counts", {}).get("chunks", 0)


async def completed(db, job_id: str) -> dict:
    async def done():
        (row,) = executions(db, job_id)
        assert row["status"] == "completed"
        return row

    return await assert_eventually(done, timeout=90)


async def test_worker_killed_mid_run_another_replica_finishes(
    client, db, task_queue, start_workers, gate
):
    total = 20_000
    insert_invoices(db, total, due=OVERDUE)
    workers = start_workers(3, **gate.env)
    job = invoice_job(chunk_size=1000, **TAKEOVER)
    async with registered(client, job, task_queue):
        await client.get_schedule_handle(job.id).trigger()
        await gate.reached()  # the first chunk done with the claim, before the second
        assert chunks_done(db, job.id) == 1
        for _ in range(3):
            gate.step()
            await gate.reached()
        assert chunks_done(db, job.id) == 4
        victim = holder_pid(db, job.id)
        assert victim in {w.pid for w in workers}
        os.kill(victim, signal.SIGKILL)
        gate.open()

        row = await completed(db, job.id)
        # Token 1 the begin's, 2 the work activity's, a third the retry's.
        assert row["attempt"] >= 3, "a second attempt of the work must have taken over"
        assert row["holder"] is None and holder_pid is not None
        assert row["result"]["counts"]["reminded"] == total
        # The retry resumed after the fourth chunk: it did not start again from the first.
        assert row["result"]["counts"]["chunks"] == 20
        assert_each_invoice_reminded_once(db, total)


async def test_paused_worker_with_a_stale_token_commits_nothing(
    client, db, task_queue, start_workers, gate
):
    total = 5_000
    insert_invoices(db, total, due=OVERDUE)
    # The frozen worker's session waits at the gate, holding nothing anyone needs: it must
    # outlive the freeze, however long the takeover takes here.
    workers = start_workers(2, DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS="3600", **gate.env)
    job = invoice_job(chunk_size=500, **TAKEOVER)
    async with registered(client, job, task_queue):
        await client.get_schedule_handle(job.id).trigger()
        await gate.reached()
        gate.step()
        await gate.reached()
        paused_pid = holder_pid(db, job.id)
        (held,) = executions(db, job.id)
        paused = next(w for w in workers if w.pid == paused_pid)
        paused.signal(signal.SIGSTOP)
        try:
            gate.open()
            row = await completed(db, job.id)
            assert row["attempt"] > held["attempt"] and holder_pid is not None
            assert row["holder"] is None
            assert_each_invoice_reminded_once(db, total)
        finally:
            paused.signal(signal.SIGCONT)

        # The paused attempt wakes up holding its token (2: the begin's transaction claimed
        # with 1). Either its next chunk is refused by the fence, or its heartbeat learns
        # first that the attempt timed out; both ways it must commit nothing.
        stale = f"attempt {held['attempt']} is stale"
        wait_for_text(paused.log, (stale, "Activity cancelled"), timeout=60)
        (after,) = executions(db, job.id)
        assert after["status"] == "completed" and after["attempt"] == row["attempt"]
        assert after["result"] == row["result"]
        assert_each_invoice_reminded_once(db, total)


async def test_sigterm_drains_the_running_activity_and_exits_zero(
    client, db, task_queue, start_workers, gate
):
    total = 6_000
    insert_invoices(db, total, due=OVERDUE)
    (worker,) = start_workers(1, **gate.env)
    job = invoice_job(chunk_size=500)
    async with registered(client, job, task_queue):
        await client.get_schedule_handle(job.id).trigger()
        await gate.reached()
        gate.step()
        await gate.reached()
        worker.signal(signal.SIGTERM)
        wait_for_text(worker.log, "stopping: no new tasks", timeout=60)
        gate.open()  # the in-flight activity goes on while the worker drains
        assert worker.process.wait(60) == 0
        (row,) = executions(db, job.id)
        # It finished inside the grace period: no retry was needed (token 1 the begin's,
        # which did the first chunk, 2 the work activity's).
        assert row["status"] == "completed"
        assert row["attempt"] == 2
        assert row["result"]["counts"]["chunks"] == 12
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
