"""A dispatcher killed between its decision's commit and its starts loses nothing and
doubles nothing: the next attempt of its run starts every intent left unstarted.

The kill lands at the chunk gate (`tests/integration/chunk_gate.py`), which the dispatcher
passes after each committed decision and before its starts, so it is killed exactly there,
however slow the machine. The dispatcher's schedule is paused: only the test's trigger
starts a tick, whose clock is its trigger time.
"""

from __future__ import annotations

import os
import signal
from datetime import UTC, datetime, timedelta

import pytest

from schedules.catalog.model import default_catalog
from schedules.sync.attributes import runtime_attributes
from tests.helpers import assert_eventually
from tests.integration.jobs import FAST_RETRY, executions, registered
from tests.integration.runtime import audit_clean, fresh_ids, insert_schedule, settled

pytestmark = pytest.mark.timeout(240)


def dispatcher_job(shard: int):
    """The catalog's dispatcher of `shard`, paused (the test triggers its one tick: no
    session), with a short heartbeat so a killed worker's attempt times out soon."""
    job = default_catalog()[f"runtime-dispatch-{shard}"]
    return job.model_copy(
        update={
            "params": job.params | {"max_seconds": 0},
            "heartbeat": timedelta(seconds=3),
            "retry": FAST_RETRY,
            "paused": True,
            "note": "test: triggered ticks only",
        }
    )


async def test_dispatcher_killed_mid_dispatch_loses_and_doubles_nothing(
    db, database_url, client, task_queue, start_workers, gate
):
    await runtime_attributes(client, register=True)
    base = fresh_ids(db)
    minute = datetime.now(UTC).replace(second=0, microsecond=0)
    owned = {  # each weekly report names its own tenant's customer
        i: db.execute(
            "INSERT INTO customers (tenant, name, email, timezone)"
            " VALUES (%s, 'T', 't@example.com', 'UTC') RETURNING id",
            (f"t{i}",),
        ).fetchone()[0]
        for i in range(0, 40, 2)
    }
    ids = [
        insert_schedule(
            db,
            tenant=f"t{i}",
            name=f"report-{i}",
            kind="test-noop" if i % 2 else "weekly-report",
            params={} if i % 2 else {"customer_id": owned[i]},
            cron="* * * * *",
            timezone="UTC",
            next_fire_at=minute,
            timing_since=minute,
            end_at=minute,  # one fire time: a tick in the next minute finds only this one
        )
        for i in range(40)
    ]
    shard = (base + 1) % 4  # the shard of the first schedule
    mine = [sid for sid in ids if sid % 4 == shard]
    # Only one shard's dispatcher ticks here: the other shards' rows go.
    db.execute("DELETE FROM runtime_schedules WHERE NOT id = ANY(%s)", (mine,))
    (victim,) = start_workers(1, **gate.env)
    job = dispatcher_job(shard)
    async with registered(client, job, task_queue):
        await client.get_schedule_handle(job.id).trigger()
        await gate.reached()  # the decision committed, no workflow started yet
        intents = db.execute(
            "SELECT count(*), count(started_at) FROM runtime_dispatch_intents"
        ).fetchone()
        assert intents == (len(mine), 0)
        os.kill(victim.pid, signal.SIGKILL)
        gate.open()
        start_workers(1)  # the dispatcher's next attempt runs here, and the slots' runs

        async def dispatched():
            (row,) = executions(db, job.id)
            assert row["status"] == "completed"
            return row

        row = await assert_eventually(dispatched, timeout=120)
        assert row["attempt"] >= 2  # a second attempt took the tick over
        assert row["result"]["counts"]["intents"] == 0  # it decided nothing again
        await settled(db, len(mine), timeout=120)
    started = db.execute(
        "SELECT count(*) FROM runtime_dispatch_intents WHERE started_at IS NOT NULL"
    ).fetchone()[0]
    assert started == len(mine)
    done = db.execute(
        "SELECT count(*), count(DISTINCT job_name), sum(duplicate_runs) FROM job_executions"
        " WHERE job_name LIKE 'rt-%%' AND status = 'completed'"
    ).fetchone()
    assert done == (len(mine), len(mine), 0), db.execute(
        "SELECT id, job_name, status, origin, error FROM job_executions ORDER BY id"
    ).fetchall()
    await audit_clean(
        database_url, client, task_queue, minute, minute + timedelta(minutes=1),
        now=minute + timedelta(minutes=1),
    )  # fmt: skip
