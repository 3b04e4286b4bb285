"""The baseline of `bench/fleet.py`: raw Temporal, a workflow that runs one no-op activity.

    python bench/fleet_raw.py --address 127.0.0.1:7233 --task-queue raw

runs one worker process for it (the bench starts several). The workflow returns the
activity's start time and, for a schedule-started run, its scheduled time, so the bench can
measure fire latency the same way on both sides: from the slot to the first activity.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from datetime import UTC, datetime, timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import SearchAttributeKey
from temporalio.worker import Worker

SCHEDULED_START_TIME = SearchAttributeKey.for_datetime("TemporalScheduledStartTime")


@activity.defn
async def noop() -> str:
    """Do nothing; say when it started."""
    return datetime.now(UTC).isoformat()


@workflow.defn
class RawWorkflow:
    @workflow.run
    async def run(self) -> dict[str, str | None]:
        started = await workflow.execute_activity(
            noop, start_to_close_timeout=timedelta(seconds=30)
        )
        slot = workflow.info().typed_search_attributes.get(SCHEDULED_START_TIME)
        return {"activity_started": started, "scheduled": slot.isoformat() if slot else None}


async def serve(address: str, task_queue: str) -> None:
    client = await Client.connect(address)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with Worker(client, task_queue=task_queue, workflows=[RawWorkflow], activities=[noop]):
        print("worker ready", flush=True)
        await stop.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", required=True)
    parser.add_argument("--task-queue", required=True)
    args = parser.parse_args()
    asyncio.run(serve(args.address, args.task_queue))
