"""The runtime schedules' runs to record for the replay tests (issue 21): every path through
`RuntimeRunWorkflow` and `RuntimeBatchWorkflow` (`workflows/runtime_run.py`).

- `runtime-run-completed`: a weekly report triggered (a manual slot run on its own): the
  schedule read and the slot claimed by the local activity, the kind's work, completed;
- `runtime-run-already-completed`: the same slot run again: settled, no work;
- `runtime-run-skipped`: a slot of a schedule that does not exist: recorded skipped;
- `runtime-run-failed`: a test-noop slot whose stored params its kind refuses for good:
  the failure recorded, the run failed;
- `runtime-batch`: 130 test-noop slots due at one minute, started by a dispatcher tick as
  one batch (two activity calls: 100 slots, then 30), one slot settled before, one whose
  params fail it alone.

Called by `tests/replay/record_histories.py` (`--scenarios runtime`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import psycopg
from psycopg_pool import AsyncConnectionPool

from activities.runtime.dispatch import Dispatcher
from activities.runtime.models import RuntimeRun, batch_workflow_id, slot_workflow_id
from jobs.runtime_dispatch.activities import batch_kinds
from schedules import tenants
from schedules.sync.attributes import runtime_attributes

if TYPE_CHECKING:
    from tests.replay.record_histories import Recorder

BATCH = 130


async def runtime_scenarios(rec: Recorder) -> None:
    await runtime_attributes(rec.client, register=True)
    await _single_slots(rec)
    await _batch(rec)


async def _single_slots(rec: Recorder) -> None:
    rec.sql(
        "INSERT INTO customers (tenant, name, email, timezone)"
        " VALUES ('replay', 'Replay', 'replay@example.com', 'Europe/Paris')"
    )
    report = await tenants.create(
        rec.db_url,
        {
            "tenant": "replay",
            "name": "weekly",
            "kind": "weekly-report",
            "cron": "0 8 * * 1",
            "timezone": "Europe/Paris",
            "params": {"customer_id": 1},
        },
        by="replay",
    )
    done = await tenants.trigger(
        rec.db_url, report.schedule.id, by="replay", client=rec.client, task_queue=rec.task_queue
    )
    (intent,) = done.recorded
    await rec.save(intent.workflow_id, "runtime-run-completed")
    await rec.client.start_workflow(
        "RuntimeRunWorkflow",
        RuntimeRun(schedule_id=report.schedule.id, scheduled_at=intent.scheduled_at),
        id=intent.workflow_id,
        task_queue=rec.task_queue,
    )
    await rec.save(intent.workflow_id, "runtime-run-already-completed", newest=True)

    slot = datetime.now(UTC).replace(second=0, microsecond=0)
    missing = slot_workflow_id(999_999_999, slot)
    await rec.client.start_workflow(
        "RuntimeRunWorkflow",
        RuntimeRun(schedule_id=999_999_999, scheduled_at=slot),
        id=missing,
        task_queue=rec.task_queue,
    )
    await rec.save(missing, "runtime-run-skipped")

    noop = await tenants.create(
        rec.db_url,
        {"tenant": "replay", "name": "noop", "kind": "test-noop", "cron": "* * * * *",
         "timezone": "UTC"},
        by="replay",
    )  # fmt: skip
    rec.sql("UPDATE runtime_schedules SET params = '{\"size\": 0}' WHERE id = %s", noop.schedule.id)
    failed = await tenants.trigger(
        rec.db_url, noop.schedule.id, by="replay", client=rec.client, task_queue=rec.task_queue
    )
    await rec.save(failed.recorded[0].workflow_id, "runtime-run-failed")


async def _batch(rec: Recorder) -> None:
    minute = datetime.now(UTC).replace(second=0, microsecond=0)
    rec.sql(
        """
        INSERT INTO runtime_schedules
            (tenant, name, kind, cron, timezone, params, catchup, shard, next_fire_at,
             timing_since, end_at)
        SELECT 'batch-' || n, 'noop', 'test-noop', '* * * * *', 'UTC',
               CASE WHEN n = 7 THEN '{"size": 0}' ELSE '{}' END::jsonb, 'latest', 0, %s, %s, %s
        FROM generate_series(1, %s) AS n
        """,
        minute,
        minute - timedelta(hours=1),
        minute,
        BATCH,
    )
    with_ids = "SELECT min(id) FROM runtime_schedules WHERE tenant LIKE 'batch-%%'"
    rec.sql(
        "INSERT INTO job_executions (job_name, scheduled_at, status, origin, finished_at)"
        f" SELECT 'rt-' || (({with_ids}) + 3), %s, 'completed', 'scheduled', now()",
        minute,
    )
    async with AsyncConnectionPool(rec.db_url, min_size=1, max_size=2, open=False) as pool:
        await pool.wait()
        dispatcher = Dispatcher(pool, rec.client, rec.task_queue, batch_kinds())
        counts = await dispatcher.tick(0, minute + timedelta(seconds=1))
    assert counts.started == 1, counts
    with psycopg.connect(rec.db_url) as conn:
        (first,) = conn.execute(with_ids).fetchone()
    await rec.save(batch_workflow_id(first, minute), "runtime-batch")
