"""Bring the Temporal server's schedules in line with the catalog.

Sync creates missing schedules, updates only those that differ, deletes the schedules it
manages that the catalog no longer has (unless told not to), and never touches a schedule
it does not manage. Each schedule's action carries the catalog entry it was built from, so
the difference is computed field by field, and a sync with nothing to change sends nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from temporalio.client import (
    Client,
    ScheduleAlreadyRunningError,
    ScheduleDescription,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.service import RPCError, RPCStatusCode

from schedules.catalog import JobSpec
from schedules.compile import (
    MANAGED_MEMO_KEY,
    MANAGED_MEMO_VALUE,
    TIMING_FIELDS,
    compile_schedule,
)
from schedules.timing import describe_spec, spec_outdated
from worker.errors import CatalogError
from workflows import JobRun

logger = logging.getLogger(__name__)

# Describe calls in flight at once: enough for 1,000 schedules in seconds, not a flood.
_CONCURRENCY = 16


@dataclass
class Change:
    """What sync does (or would do) to one schedule."""

    job_id: str
    action: str  # create | update | delete | unchanged
    fields: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # name -> (old, new)
    drift: list[str] = field(default_factory=list)


@dataclass
class SyncReport:
    changes: list[Change] = field(default_factory=list)

    def ids(self, action: str) -> list[str]:
        return [c.job_id for c in self.changes if c.action == action]

    @property
    def created(self) -> list[str]:
        return self.ids("create")

    @property
    def updated(self) -> list[str]:
        return self.ids("update")

    @property
    def deleted(self) -> list[str]:
        return self.ids("delete")

    @property
    def drift(self) -> list[Change]:
        return [c for c in self.changes if c.drift]


def check_unique(jobs: Iterable[JobSpec]) -> None:
    seen: set[str] = set()
    for job in jobs:
        if job.id in seen:
            raise CatalogError(f"job id {job.id!r} is declared twice")
        seen.add(job.id)


async def managed_schedule_ids(client: Client) -> set[str]:
    """Ids of the schedules on the server that this project manages."""
    ids = set()
    async for entry in await client.list_schedules():
        if await entry.memo_value(MANAGED_MEMO_KEY, default=None) == MANAGED_MEMO_VALUE:
            ids.add(entry.id)
    return ids


async def _describe(client: Client, job_id: str) -> ScheduleDescription | None:
    try:
        return await client.get_schedule_handle(job_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise


async def _current_run(client: Client, description: ScheduleDescription) -> JobRun | None:
    args = getattr(description.schedule.action, "args", None)
    if not args:
        return None
    try:
        (run,) = await client.data_converter.decode(args, [JobRun])
    except Exception:  # an older or foreign payload: treat as "everything differs"
        return None
    return run


def _field_changes(old: dict[str, Any], new: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    return {
        name: (old.get(name), new.get(name))
        for name in sorted(set(old) | set(new))
        if old.get(name) != new.get(name)
    }


async def plan(
    client: Client, jobs: Iterable[JobSpec], task_queue: str, prune: bool = True
) -> tuple[SyncReport, dict[str, datetime | None]]:
    """Compare the catalog with the server; return the changes and each job's timing_since."""
    jobs = list(jobs)
    check_unique(jobs)
    limit = asyncio.Semaphore(_CONCURRENCY)
    now = datetime.now(UTC).replace(microsecond=0)

    async def one(job: JobSpec) -> tuple[Change, datetime | None]:
        try:  # before anything is sent: a cron Temporal cannot express stops the whole sync
            compiled = compile_schedule(job, task_queue, now=now).spec
        except CatalogError as exc:
            raise CatalogError(f"job {job.id!r}: {exc}") from None
        async with limit:
            description = await _describe(client, job.id)
        if description is None:
            return Change(job.id, "create"), now
        if await description.memo_value(MANAGED_MEMO_KEY, default=None) != MANAGED_MEMO_VALUE:
            raise CatalogError(
                f"schedule {job.id!r} exists but is not managed by this project; "
                "rename the job or delete that schedule"
            )
        current = await _current_run(client, description)
        old = current.definition if current else {}
        new = job.model_dump(mode="json")
        fields = _field_changes(old, new)
        if description.schedule.action.task_queue != task_queue:
            fields["task_queue"] = (description.schedule.action.task_queue, task_queue)
        # A DST-compiled spec is good for about ten years; it is recompiled once a year, and
        # when the tz database or the compiler changed (schedules/timing.py).
        stored = description.schedule.spec
        if spec_outdated(stored, compiled):
            fields["calendars"] = (describe_spec(stored), describe_spec(compiled))
        state = description.schedule.state
        drift = []
        if state.paused and not job.paused:
            drift.append(
                f"paused on the server ({state.note or 'no note'}) but not in the catalog; "
                f"kept paused: resume with `python -m schedules resume {job.id}`"
            )
        elif job.paused and not state.paused:
            fields["paused (on the server)"] = (False, True)
        timing_changed = any(name in fields for name in TIMING_FIELDS)
        since = now if timing_changed or current is None else current.timing_since
        if current is not None and current.timing_since is None:
            fields.setdefault("timing_since", (None, since))
        action = "update" if fields else "unchanged"
        return Change(job.id, action, fields, drift), since

    results = await asyncio.gather(*(one(job) for job in jobs))
    report = SyncReport([change for change, _ in results])
    since = {change.job_id: s for change, s in results}
    if prune:
        wanted = {job.id for job in jobs}
        for job_id in sorted(await managed_schedule_ids(client) - wanted):
            report.changes.append(Change(job_id, "delete"))
    return report, since


async def sync(
    client: Client,
    jobs: Iterable[JobSpec],
    task_queue: str,
    prune: bool = True,
    dry_run: bool = False,
) -> SyncReport:
    """Apply the catalog: create, update what differs, delete what it no longer has."""
    jobs = {job.id: job for job in jobs} if not isinstance(jobs, dict) else jobs
    report, since = await plan(client, list(jobs.values()), task_queue, prune)
    if dry_run:
        return report
    limit = asyncio.Semaphore(_CONCURRENCY)

    async def apply(change: Change) -> None:
        async with limit:
            if change.action == "create":
                await _create(client, jobs[change.job_id], task_queue, since[change.job_id])
            elif change.action == "update":
                await _update(client, jobs[change.job_id], task_queue, since[change.job_id])
            elif change.action == "delete":
                try:
                    await client.get_schedule_handle(change.job_id).delete()
                except RPCError as err:
                    if err.status != RPCStatusCode.NOT_FOUND:  # a concurrent sync got there
                        raise

    await asyncio.gather(*(apply(change) for change in report.changes))
    return report


async def _create(client: Client, job: JobSpec, task_queue: str, since: datetime | None) -> None:
    try:
        await client.create_schedule(
            job.id,
            compile_schedule(job, task_queue, since),
            memo={MANAGED_MEMO_KEY: MANAGED_MEMO_VALUE},
        )
    except ScheduleAlreadyRunningError:
        # A concurrent sync created it first: make sure it matches.
        await _update(client, job, task_queue, since)


async def _update(client: Client, job: JobSpec, task_queue: str, since: datetime | None) -> None:
    schedule = compile_schedule(job, task_queue, since)

    def replace(current: ScheduleUpdateInput) -> ScheduleUpdate:
        # An operator's pause survives; the catalog can only add a pause, not lift one.
        state = current.description.schedule.state
        if state.paused and not schedule.state.paused:
            schedule.state.paused = True
            schedule.state.note = state.note
        return ScheduleUpdate(schedule=schedule)

    await client.get_schedule_handle(job.id).update(replace)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def format_report(report: SyncReport, dry_run: bool) -> str:
    """The human-readable account of a sync, field by field."""
    verb = {"create": "create", "update": "update", "delete": "delete"}
    if dry_run:
        verb = {"create": "would create", "update": "would update", "delete": "would delete"}
    else:
        verb = {"create": "created", "update": "updated", "delete": "deleted"}
    lines = []
    for change in report.changes:
        if change.action != "unchanged":
            lines.append(f"{verb[change.action]:<13} {change.job_id}")
            for name, (old, new) in change.fields.items():
                lines.append(f"    {name}: {_show(old)} -> {_show(new)}")
        for note in change.drift:
            lines.append(f"drift         {change.job_id}: {note}")
    if not any(c.action != "unchanged" for c in report.changes):
        lines.insert(0, "no changes")
    return "\n".join(lines)
