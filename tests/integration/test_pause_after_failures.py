"""Pause on repeated failure for catalog jobs (issue 40, item 3) on real servers: a job
with `pause_after_failures = 2` whose runs fail has its Temporal schedule paused after the
second failure, with a note naming the slots and the last error, recorded for the audit
and `check`. (The runtime-schedule variant: test_runtime_fairness.py.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from temporalio.client import WorkflowFailureError

from schedules.health.runtime import runtime_alerts
from schedules.pauses import pause_in_force
from tests.helpers import assert_eventually
from tests.helpers.audit import audited
from tests.integration.jobs import executions, invoice_job, registered, trigger_at

pytestmark = pytest.mark.timeout(180)


async def test_two_failures_in_a_row_pause_the_catalog_jobs_schedule(
    client, db, database_url, task_queue, start_workers
):
    start_workers(1)
    # Rejected by the job's params model: every run fails. Unpaused, yearly: its cron
    # adds no run of its own to the test's triggered ones.
    job = invoice_job(chunk_size=0).model_copy(
        update={"pause_after_failures": 2, "paused": False, "note": "", "cron": "0 0 1 1 *"}
    )
    before = datetime.now(UTC).replace(microsecond=0)
    slots = [before - timedelta(minutes=2), before - timedelta(minutes=1)]
    async with registered(client, job, task_queue):
        handle = client.get_schedule_handle(job.id)
        for n, slot in enumerate(slots, start=1):
            await trigger_at(client, job.id, slot)

            async def failed(n: int = n):
                rows = executions(db, job.id)
                assert [r["status"] for r in rows] == ["failed"] * n, rows

            await assert_eventually(failed, timeout=60)
            run = client.get_workflow_handle(f"{job.id}-{slot:%Y-%m-%dT%H:%M:%SZ}")
            with pytest.raises(WorkflowFailureError):
                await run.result()
        state = (await handle.describe()).schedule.state
        assert state.paused
        assert state.note.startswith(
            f"auto-paused after 2 consecutive failed slot(s) ({slots[0]:%Y-%m-%dT%H:%M:%SZ}, "
            f"{slots[1]:%Y-%m-%dT%H:%M:%SZ}); last error: "
        ), state.note
        assert "chunk_size" in state.note
        recorded = await pause_in_force(database_url, job.id)
        assert recorded is not None and recorded["paused_by"] == "auto"
        assert recorded["note"] == state.note
        alerts = await runtime_alerts(database_url, datetime.now(UTC), timedelta(days=1), 10)
        assert ("auto_paused", job.id) in [a[:2] for a in alerts], alerts
        await audited(client, database_url, task_queue, [job], start=slots[0])
