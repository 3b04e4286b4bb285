"""The catalog's jobs on the dashboard: the catalog the stack syncs, each job's state on
Temporal (paused with its note, by whom), its next fire times and its last run.

The catalog is the one the worker and `python -m schedules` read: `SCHEDULES_CATALOG`
(default: the packaged `schedules/jobs.toml`), with the engine's own jobs beside it
(`schedules/engine.toml`), read once per process. Its state comes from Temporal (the
schedules `sync` made): for the list, from the schedule listing, one call (as `sync`
reads it); for one job's page, described (`schedules.server.state.schedule_state`, as
`python -m schedules list` and `describe` ask). A catalog job has no tenant.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from fastapi import Request

from api.deps import temporal_client
from api.pages.reads import last_runs, rows
from core import redact
from core.errors import SchedulerError, first_line
from schedules.catalog.compile import MANAGED_MEMO_KEY, MANAGED_MEMO_VALUE
from schedules.catalog.model import JobSpec, load_valid_jobs
from schedules.health.evidence import latest_fire_time
from schedules.server.retry import Retry
from schedules.server.state import ServerState, schedule_states
from schedules.tenants.fires import FireTime, next_fire_times

# A page waits this long for a Temporal that retries (starting) before it says so.
TEMPORAL_SECONDS = 2.0
LATE_AFTER = timedelta(minutes=1)  # due this long ago and no run recorded: late


@dataclass(frozen=True)
class Catalog:
    """The catalog's valid jobs by id, and the ids of the entries left out as invalid
    (`python -m schedules validate` says why)."""

    jobs: dict[str, JobSpec]
    invalid: list[str] = field(default_factory=list)


def catalog(request: Request) -> Catalog:
    """The catalog the stack syncs, read on the first page that shows it."""
    state = request.app.state
    if getattr(state, "catalog", None) is None:
        jobs, broken = load_valid_jobs(state.settings.schedules_catalog, engine=True)
        state.catalog = Catalog({job.id: job for job in jobs}, sorted(broken))
    return state.catalog


def retry() -> Retry:
    return Retry(TEMPORAL_SECONDS, address="Temporal", setting=lambda: "(TEMPORAL_ADDRESS)")


async def server_states(
    request: Request, job_ids: list[str]
) -> tuple[dict[str, ServerState], str | None]:
    """What Temporal says of each job's schedule (described, as `python -m schedules
    describe` asks), or (nothing, why) when it cannot say."""
    if not job_ids:
        return {}, None
    try:
        client = await temporal_client(request)
        return await schedule_states(client, job_ids, retry=retry()), None
    except (RuntimeError, TimeoutError, SchedulerError) as exc:
        return {}, temporal_problem(request, exc)


async def listed_states(
    request: Request, job_ids: list[str]
) -> tuple[dict[str, ServerState], str | None]:
    """Each job's schedule as Temporal's schedule listing shows it (paused, note, next
    and recent actions): one call for every job, where describing each one is a query of
    its own; the listing may lag a change by a moment (the job's page describes it)."""
    if not job_ids:
        return {}, None
    wanted = set(job_ids)

    async def listing() -> dict[str, ServerState]:
        found = {job_id: ServerState(exists=False) for job_id in job_ids}
        async for entry in await client.list_schedules():
            if entry.id not in wanted:
                continue
            managed = await entry.memo_value(MANAGED_MEMO_KEY, default=None) == MANAGED_MEMO_VALUE
            state, info = entry.schedule.state if entry.schedule else None, entry.info
            found[entry.id] = ServerState(
                exists=True, managed=managed, paused=bool(state and state.paused),
                note=(state.note or None) if state else None,
                next_times=list(info.next_action_times) if info else [],
                recent=list(info.recent_actions) if info else [],
            )  # fmt: skip
        return found

    try:
        client = await temporal_client(request)
        return await retry()(listing), None
    except (RuntimeError, TimeoutError, SchedulerError) as exc:
        return {}, temporal_problem(request, exc)


def temporal_problem(request: Request, exc: BaseException) -> str:
    """Why Temporal could not be asked, in one short line (the SDK's are long)."""
    address = request.app.state.settings.temporal_address
    reason = redact.scrub(first_line(exc))[:200] if str(exc) else type(exc).__name__
    return f"Temporal at {address} cannot be asked ({reason})"


def job_state(
    job: JobSpec,
    server: ServerState | None,
    last: dict[str, Any] | None,
    pause: dict[str, Any] | None,
    now: datetime,
) -> str:
    """The job's state as the list filters it: paused (by an operator or the catalog),
    auto-paused (the engine, after failures), failing (the last run failed), late (see
    `_late`), active; or `not synced`, or `unknown` when Temporal cannot be asked."""
    if server is None:
        return "unknown"
    if not server.usable:
        return "not synced"
    if server.paused:
        return "auto-paused" if pause is not None and pause["paused_by"] == "auto" else "paused"
    if last is not None and last["status"] == "failed":
        return "failing"
    return "late" if _late(job, server, last, now) else "active"


def _late(job: JobSpec, server: ServerState, last: dict[str, Any] | None, now: datetime) -> bool:
    """Late: Temporal's next start is over a minute past (its scheduler is behind), or it
    started the newest fire time over a minute past and no run of it is recorded (no
    worker took it). A slot Temporal did not start (paused then, before the schedule
    existed, skipped by its overlap) is not late: `explain` says why it did not run."""
    if server.next_times and server.next_times[0] < now - LATE_AFTER:
        return True
    due = latest_fire_time(job, now - LATE_AFTER)
    started = {action.scheduled_at for action in server.recent}
    if due is None or due not in started:
        return False
    return last is None or last["scheduled_at"] < due


@dataclass(frozen=True)
class Listing:
    """The catalog's jobs of a kind, and what Temporal's listing says of them (or why it
    could not be asked)."""

    jobs: list[JobSpec]
    servers: dict[str, ServerState]
    error: str | None


async def listing(request: Request, kind: str) -> Listing:
    """The catalog's jobs (of `kind`, when given) and their schedules' listing. Asks
    Temporal only: the list starts it first, and reads PostgreSQL meanwhile."""
    jobs = [job for job in catalog(request).jobs.values() if not kind or job.kind == kind]
    servers, error = await listed_states(request, [job.id for job in jobs])
    return Listing(jobs, servers, error)


async def catalog_rows(conn: Any, listed: Listing, state: str, now: datetime) -> list[dict]:
    """The list's rows of the listed jobs (those in `state`, when given): state, pause,
    last run, next three fire times."""
    ids = [job.id for job in listed.jobs]
    last = await last_runs(conn, ids)
    paused = [i for i, s in listed.servers.items() if s.usable and s.paused]
    pauses = {}
    if paused:
        pauses = {r["job_name"]: r for r in await rows(conn, "pauses_in_force", {"jobs": paused})}
    found = []
    for job in listed.jobs:
        server = listed.servers.get(job.id)
        judged = job_state(job, server, last.get(job.id), pauses.get(job.id), now)
        if state and judged != state:
            continue
        found.append({"job": job, "state": judged, "server": server, "pause": pauses.get(job.id),
                      "last": last.get(job.id), "fires": fire_times(job, now, 3)})  # fmt: skip
    return found


def fire_times(job: JobSpec, after: datetime, n: int) -> list[FireTime]:
    """The job's next `n` fire times after `after`, with their DST and calendar notes (as
    `python -m schedules next` says them)."""
    return next_fire_times(job, after, n)
