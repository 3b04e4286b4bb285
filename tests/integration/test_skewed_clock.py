"""A worker whose wall clock is wrong decides nothing by it (docs/architecture.md, "Which
clock decides what"; issue 41, item 3).

The worker runs under Debian's faketime (its library preloaded: the process's real clock
moves, not a flag of ours), 5 minutes ahead of the machine, PostgreSQL and Temporal. A
job with a 60 s starting deadline is triggered: the slot is on time by the server's clock,
so it is claimed and run, never recorded `skipped` ("missed starting deadline") as it was
while the claim judged lateness by the worker's clock.
"""

from __future__ import annotations

import uuid
from datetime import date, timedelta
from pathlib import Path

from tests.helpers import assert_eventually
from tests.helpers.audit import audited
from tests.integration.jobs import (
    assert_each_invoice_reminded_once,
    executions,
    insert_invoices,
    invoice_job,
    registered,
)

FAKETIME_LIB = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


def skewed(offset: str) -> dict[str, str]:
    assert FAKETIME_LIB.exists(), "needs Debian's faketime (.ci/run installs it)"
    return {
        "LD_PRELOAD": str(FAKETIME_LIB),
        "FAKETIME": offset,
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }


async def test_a_worker_five_minutes_ahead_runs_an_on_time_slot_with_a_deadline(
    client, db, database_url, task_queue, start_workers
):
    insert_invoices(db, 20, due=date(2020, 1, 1))
    job = invoice_job(chunk_size=5).model_copy(
        update={"id": f"skew-{uuid.uuid4().hex[:8]}", "starting_deadline": timedelta(seconds=60)}
    )
    start_workers(1, **skewed("+5m"))
    async with registered(client, job, task_queue):
        await client.get_schedule_handle(job.id).trigger()

        async def settled():
            rows = executions(db, job.id)
            assert len(rows) == 1 and rows[0]["status"] in ("completed", "skipped"), rows
            return rows[0]

        row = await assert_eventually(settled, timeout=90)
        assert (row["status"], row["error"]) == ("completed", None), row
        assert_each_invoice_reminded_once(db, 20)
        await audited(client, database_url, task_queue, [job], start=row["scheduled_at"])
