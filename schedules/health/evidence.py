"""The evidence `explain` judges: what the record and the server say about one fire time.

`gather_evidence` reads the slot's `job_executions` row (PostgreSQL, by connection string) and the
server's side (the schedule's state, the slot's workflow, the workers polling the task
queue, a backfill that covered it); what cannot be read is noted in the evidence, so the
verdict can say "cannot tell" instead of guessing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

import psycopg
from temporalio.client import Client

from activities.catchup.backfills import covering_backfill
from activities.catchup.missed import second_occurrence_of
from core.errors import TemporalUnreachableError
from schedules.catalog.compile import job_task_queue
from schedules.catalog.model import JobSpec
from schedules.catalog.times import utc_text
from schedules.health.explain import Evidence
from schedules.pauses import pause_in_force, paused_by_text
from schedules.record import (
    DatabaseUnavailableError,
    edited_slot,
    execution_at,
    execution_within,
)
from schedules.server.retry import Retry
from schedules.server.state import OperationError, pollers, schedule_state, workflow_status
from timing import Timing

_TICK = timedelta(microseconds=1)


def _grid(job: JobSpec) -> Timing:
    """The job's fire times without its bounds: explain judges a time against the grid
    and the bounds apart, so it can say "after the schedule's end_at"."""
    # Without its calendar too: a slot is judged on the cron's grid, then what the calendar
    # did to it is said (`Evidence.calendar`).
    return job.timing.plain.model_copy(update={"start_at": None, "end_at": None})


def latest_fire_time(job: JobSpec, now: datetime) -> datetime | None:
    """The job's newest fire time at or before `now`."""
    return _grid(job).last_before(now + _TICK)


def neighbours(job: JobSpec, at: datetime) -> tuple[datetime | None, datetime | None]:
    """The job's fire times just before and just after `at`."""
    grid = _grid(job)
    return grid.last_before(at), grid.next_after(at)


def on_grid(job: JobSpec, at: datetime) -> bool:
    return bool(_grid(job).fire_times(at, at + _TICK))


async def _manual_row(ev: Evidence, conninfo: str) -> dict[str, Any] | None:
    """The row of a run started off the job's grid (a trigger, a direct start) at `ev.fire`:
    its slot is its start to the microsecond, and operators name it to the second (as its
    workflow id, `runs` and `trigger` show it), so that second is looked up."""
    start = ev.fire
    end = start + (timedelta(seconds=1) if start.microsecond == 0 else _TICK)
    try:
        return await execution_within(conninfo, ev.job.id, start, end)
    except DatabaseUnavailableError as exc:
        ev.database_error = str(exc)
        return None


async def paused_by(conninfo: str, job_id: str, *, catalog: bool = False) -> str:
    """Who paused `job_id`'s schedule (`schedules.pauses.paused_by_text`; `catalog`: the
    catalog pauses it), from the pause recorded in PostgreSQL; said so when that cannot be
    read."""
    try:
        recorded = await pause_in_force(conninfo, job_id)
    except (psycopg.Error, OSError):
        return "someone not known here (PostgreSQL, which records who, is unavailable)"
    return paused_by_text(recorded, catalog=catalog)


async def _paused_upstreams(
    client: Client, conninfo: str, ev: Evidence, retry: Retry | None
) -> list[str]:
    """A waiting slot's upstream jobs whose schedules are paused: by whom and why."""
    said = []
    for dep in ev.job.depends_on:
        state = await schedule_state(client, dep.job, retry=retry)
        if state.usable and state.paused:
            # The catalog entry the schedule was built from says whether it pauses it.
            who = await paused_by(
                conninfo, dep.job, catalog=bool((state.definition or {}).get("paused"))
            )
            said.append(
                f"its upstream {dep.job} is paused by {who} ({state.note or 'no note'}): "
                "its slots do not run until it is resumed"
            )
    return said


async def gather_evidence(
    client: Client | Callable[[], Awaitable[Client]],
    conninfo: str,
    job: JobSpec,
    fire: datetime,
    now: datetime,
    *,
    task_queue: str,
    retry: Retry | None = None,
) -> Evidence:
    """Everything the record and the server say about `fire`; unreachable servers are noted.

    `client` may be a coroutine function that makes one: it is called only when the server
    has to be asked, and a failure to connect is noted like any unreachable server."""
    ev = Evidence(job=job, fire=fire, now=now, task_queue=job_task_queue(job, task_queue))
    ev.on_grid = on_grid(job, fire)
    if not ev.on_grid:
        ev.neighbours = neighbours(job, fire)
        first = second_occurrence_of(fire, job.timezone)
        if first is not None and on_grid(job, first):
            ev.repeated_of = first
        ev.row = await _manual_row(ev, conninfo)
        if ev.row is None:
            return ev
        fire = ev.fire = ev.row["scheduled_at"]  # its own slot, to the microsecond
    ev.run_at = fire
    if job.timing.calendar is not None and ev.on_grid:
        ev.calendar, ev.run_at = job.timing.what_of(fire), job.timing.run_at(fire)
    if (ev.run_at or fire) > now and not ev.calendar:
        return ev
    try:
        ev.row = ev.row or await execution_at(conninfo, job.id, fire)
        ev.edit = await edited_slot(conninfo, job.id, fire)
    except DatabaseUnavailableError as exc:
        ev.database_error = str(exc)
    try:
        if not isinstance(client, Client):
            client = await client()
        ev.schedule = await schedule_state(client, job.id, retry=retry)
        ev.timing_since = ev.schedule.timing_since
        ev.workflow_status = await workflow_status(  # named after when it runs
            client, f"{job.id}-{utc_text(ev.run_at or fire)}", retry=retry
        )
        ev.pollers = await pollers(client, ev.task_queue, retry=retry)
        if ev.schedule.paused:
            ev.paused_by = await paused_by(conninfo, job.id, catalog=job.paused)
        if ev.row is not None and ev.row.get("wait_status") == "waiting":
            ev.paused_upstreams = await _paused_upstreams(client, conninfo, ev, retry)
        if ev.row is None and ev.schedule.exists and ev.schedule.skipped_overlap:
            ev.backfill = await covering_backfill(client, job.id, fire, job.overlap)
    except (OperationError, TemporalUnreachableError) as exc:
        ev.server_error = str(exc)
    return ev
