"""Create or update the catalog's schedules on the Temporal server."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from temporalio.client import (
    Client,
    ScheduleAlreadyRunningError,
    ScheduleUpdate,
    ScheduleUpdateInput,
)

from schedules.catalog import JobSpec
from schedules.compile import MANAGED_MEMO_KEY, MANAGED_MEMO_VALUE, compile_schedule
from worker.errors import CatalogError

logger = logging.getLogger(__name__)


@dataclass
class SyncReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)


def check_unique(jobs: Iterable[JobSpec]) -> None:
    seen: set[str] = set()
    for job in jobs:
        if job.id in seen:
            raise CatalogError(f"job id {job.id!r} is declared twice")
        seen.add(job.id)


async def sync(client: Client, jobs: Iterable[JobSpec], task_queue: str) -> SyncReport:
    """Create missing schedules and bring existing ones in line with the catalog."""
    jobs = list(jobs)
    check_unique(jobs)
    report = SyncReport()
    for job in jobs:
        schedule = compile_schedule(job, task_queue)
        try:
            await client.create_schedule(
                job.id, schedule, memo={MANAGED_MEMO_KEY: MANAGED_MEMO_VALUE}
            )
            report.created.append(job.id)
            continue
        except ScheduleAlreadyRunningError:
            pass

        handle = client.get_schedule_handle(job.id)
        description = await handle.describe()
        memo = await description.memo_value(MANAGED_MEMO_KEY, default=None)
        if memo != MANAGED_MEMO_VALUE:
            raise CatalogError(
                f"schedule {job.id!r} exists but is not managed by this project; "
                "rename the job or delete that schedule"
            )

        def replace(current: ScheduleUpdateInput, schedule=schedule) -> ScheduleUpdate:
            # Keep an operator's pause unless the catalog pauses the job itself.
            state = current.description.schedule.state
            if state.paused and not schedule.state.paused:
                schedule.state.paused = True
                schedule.state.note = state.note
            return ScheduleUpdate(schedule=schedule)

        await handle.update(replace)
        report.updated.append(job.id)
    return report
