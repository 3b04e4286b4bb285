"""A worker whose wall clock is wrong decides nothing by it (docs/architecture.md, "Which
clock decides what"; issue 41, item 3).

The worker runs under Debian's faketime (its library preloaded: the process's real clock
moves, not a flag of ours), 5 minutes ahead of the machine, PostgreSQL and Temporal. A
job with a 60 s starting deadline is triggered: the slot is on time by the server's clock,
so it is claimed and run, never recorded `skipped` ("missed starting deadline") as it was
while the claim judged lateness by the worker's clock.

A slot waiting for its upstream judges its dependency's `within` deadline by the server's
clock too: a worker 5 minutes ahead skipped such a slot at once as past a 4-minute
deadline (a lost slot), and one 5 minutes behind skipped it 5 minutes after a 2-second one
(a late decision), while the wait's checks read the worker's clock.
"""

from __future__ import annotations

import uuid
from datetime import date, timedelta
from pathlib import Path

import pytest

from tests.helpers import assert_eventually
from tests.helpers.audit import audited
from tests.integration.jobs import (
    assert_each_invoice_reminded_once,
    executions,
    insert_invoices,
    invoice_job,
    registered,
    registered_since,
)
from tests.integration.test_dependencies import (
    NOW,
    SINCE,
    X,
    backfill,
    downstream,
    ids,
    recent,
    settled,
    upstream,
    waiting,
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


@pytest.mark.parametrize(
    ("offset", "within"),
    [("+5m", timedelta(minutes=4)), ("-5m", timedelta(seconds=2))],
    ids=["ahead", "behind"],
)
async def test_a_dependencys_deadline_is_judged_by_the_servers_clock_on_a_skewed_worker(
    client, db, database_url, task_queue, start_workers, offset, within
):
    """A backfilled slot waits for an upstream slot that has not run (`skip` past `within`).
    Ahead: by the server's clock its 4 minutes have not passed, so it waits, and the
    upstream's run releases it. Behind: its 2 seconds pass and it is skipped at once."""
    up_id, name = ids("hourly", "skewed")
    up = upstream(up_id)
    down = downstream(name, up_id, cron="0 * * * *", slots="same", within=within, on_failure="skip")
    recent(db, up_id)
    start_workers(1, **skewed(offset))
    async with (
        registered_since(client, [up], task_queue, SINCE),
        registered_since(client, [down], task_queue, NOW),
    ):
        await backfill(client, down.id, [X])
        if offset == "+5m":
            await waiting(db, down.id, X, "0 of 1 done")
            await backfill(client, up_id, [X])
            assert (await settled(db, down.id, X, "completed"))["wait"] == "ready"
        else:
            late = await settled(db, down.id, X, "skipped")
            assert "1 of 1 slot(s) not completed within 2s" in late["error"], late["error"]
        await audited(client, database_url, task_queue, [down], start=X, end=NOW, known=[up])
