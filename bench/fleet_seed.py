"""The seed's pattern written by hand on Temporal: the side of `bench/fleet.py` that a careful
user would write instead of this project.

One workflow, one activity, one PostgreSQL transaction: insert the execution row
`ON CONFLICT DO NOTHING`, do the job's work (nightly-reconcile: the same statement as the
catalog job's, `reconcile_day`), mark the row completed, commit. No catch-up, no fencing
token, no chunks, no outbox relay bookkeeping: what the guarantees of this project cost is
the difference between this side and ours.

    python bench/fleet_seed.py --address 127.0.0.1:7233 --task-queue seed --database-url URL
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from datetime import datetime, timedelta

from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import SearchAttributeKey
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

# The sandbox re-imports this module: no pathlib here (its resolve() is off limits there).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

with workflow.unsafe.imports_passed_through():
    from jobs.nightly_reconcile.activities import (
        ReconcileParams,
        previous_local_day,
        reconcile_day,
    )
    from worker.run import workflow_runner

SCHEDULED_START_TIME = SearchAttributeKey.for_datetime("TemporalScheduledStartTime")

CLAIM = """
INSERT INTO job_executions (job_name, scheduled_at, status, origin, workflow_id, run_id)
VALUES (%(job)s, %(slot)s, 'running', 'scheduled', %(workflow_id)s, %(run_id)s)
ON CONFLICT (job_name, scheduled_at) DO NOTHING
RETURNING id
"""
PARAMS = ReconcileParams(threshold_cents=100)  # the catalog's nightly-reconcile
COMPLETE = "UPDATE job_executions SET status = 'completed', finished_at = now() WHERE id = %s"


class SeedInput(BaseModel):
    job_name: str
    scheduled_at: datetime
    workflow_id: str
    run_id: str


class SeedActivities:
    def __init__(self, pool: AsyncConnectionPool) -> None:
        self.pool = pool

    @activity.defn
    async def run_seed_job(self, job: SeedInput) -> int:
        """Claim, work and complete in one transaction; how many alerts were raised."""
        window = previous_local_day(job.scheduled_at, PARAMS.ledger_timezone)
        slot = {"job_name": job.job_name, "scheduled_at": job.scheduled_at}
        async with self.pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                CLAIM,
                {
                    "job": job.job_name,
                    "slot": job.scheduled_at,
                    "workflow_id": job.workflow_id,
                    "run_id": job.run_id,
                },
            )
            row = await cur.fetchone()
            if row is None:
                return 0  # already claimed: done once
            counts = await reconcile_day(conn, window, PARAMS, slot)
            await conn.execute(COMPLETE, (row[0],))
            return counts["alerts"]


@workflow.defn
class SeedWorkflow:
    @workflow.run
    async def run(self, job_name: str) -> int:
        info = workflow.info()
        slot = info.typed_search_attributes.get(SCHEDULED_START_TIME) or info.start_time.replace(
            microsecond=0
        )
        return await workflow.execute_activity_method(
            SeedActivities.run_seed_job,
            SeedInput(
                job_name=job_name,
                scheduled_at=slot,
                workflow_id=info.workflow_id,
                run_id=info.run_id,
            ),
            start_to_close_timeout=timedelta(seconds=60),
        )


async def serve(address: str, task_queue: str, database_url: str) -> None:
    client = await Client.connect(address, data_converter=pydantic_data_converter)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with AsyncConnectionPool(database_url, min_size=1, max_size=10, open=False) as pool:
        await pool.wait()
        worker = Worker(
            client,
            task_queue=task_queue,
            workflows=[SeedWorkflow],
            # The sandbox ours runs in: the same passthrough modules, so neither side pays
            # for re-importing what the other does not.
            workflow_runner=workflow_runner(),
            activities=[SeedActivities(pool).run_seed_job],
        )
        async with worker:
            print("worker ready", flush=True)
            await stop.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", required=True)
    parser.add_argument("--task-queue", required=True)
    parser.add_argument("--database-url", required=True)
    args = parser.parse_args()
    asyncio.run(serve(args.address, args.task_queue, args.database_url))
