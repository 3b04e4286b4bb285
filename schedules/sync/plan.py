"""Bring the Temporal server's schedules in line with the catalog.

Sync creates missing schedules, updates only those that differ, deletes the schedules it
manages that the catalog no longer has (unless told not to), and never touches a schedule
it does not manage. Each schedule's action carries the catalog entry it was built from, so
the difference is computed field by field, and a sync with nothing to change sends nothing.

A re-sync of a large catalog stays cheap because each schedule also carries a digest of
everything sync set on it (`schedules.catalog.compile.schedule_digest`) in the `ScheduledJobsDigest`
search attribute. Sync lists the schedules once and describes only the jobs that the listing
does not show as managed, carrying the digest of the job as compiled now, and in the
catalog's paused state; the others are unchanged without another call. Each job is compiled
once per sync. What that means:

- The listing comes from visibility, which lags a little behind the server. A stale entry
  shows an older digest (or none), so the job is described: the slow path, never a wrong one.
- An operator's pause shows in the listing and is reported as drift on either path.
- Sync trusts the digest. A schedule edited by other means (`temporal schedule update`,
  the Web UI, a sync from before the digest existed) keeps its digest, so sync does not
  notice the edit until the job's catalog entry changes. `sync --full` describes every job
  and puts such a schedule back.
- Sync registers the search attribute in the namespace when it is missing. Where it cannot
  (a hosted namespace without operator permissions), every job is described, as before the
  digest existed: correct, only slower. That is logged once per process.

Missed runs are counted from when the job's current timing took effect (`JobRun.timing_since`,
read by `activities.catchup.missed`), and only the server knows when that was. So a create, or an
update that changes the timing, is two writes: the schedule with its timing marked pending
(runs meanwhile count no missed time), then, once the server has it, the same schedule with
`timing_since` set to the server's own time of that write (`created_at`, `last_updated_at`).
The second write changes no spec, so the timing really did take effect at that instant. A
sync that stops between the two leaves a pending schedule, whose digest never matches a
finished one: the next sync describes it and stamps the time of its last write.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from temporalio.client import (
    Client,
    Schedule,
    ScheduleDescription,
)

from core.errors import CatalogError
from schedules.catalog.compile import (
    DIGEST_ATTRIBUTE,
    MANAGED_MEMO_KEY,
    MANAGED_MEMO_VALUE,
    TIMING_FIELDS,
    compile_schedule,
    job_task_queue,
    memo_entry,
    schedule_digest,
    timing_stamp,
)
from schedules.catalog.durations import format_duration
from schedules.catalog.files import engine_job_ids
from schedules.catalog.limits import size_problem
from schedules.catalog.model import JobSpec, catalog_error
from schedules.health.verify import keep_forced_utc
from schedules.progress import QUIET, Progress
from schedules.server.found import catalog_entry, schedule_or_none
from schedules.sync.attributes import digest_attribute
from schedules.sync.report import Change, SyncReport
from timing.calendars import describe_spec, spec_outdated
from workflows import JobRun

# Describe calls in flight at once: enough for 1,000 schedules in seconds, not a flood.
CONCURRENCY = 16


@dataclass
class Target:
    """One catalog job compiled for this sync: what its schedule should be."""

    job: JobSpec
    task_queue: str
    schedule: Schedule  # with timing_since None; `build` puts in the one the plan chose
    digest: str
    since: datetime | None = None
    # The plan applies a new timing: written pending, then stamped with the server's time.
    pending: bool = False
    # Whether the schedule carries `ScheduledJobsTiming` (registered in the namespace).
    carry_timing: bool = False

    def build(self) -> Schedule:
        """A fresh copy of the schedule to send (callers change its state), spec reused."""
        return compile_schedule(
            self.job,
            self.task_queue,
            self.since,
            spec=self.schedule.spec,
            timing_pending=self.pending,
        )

    def built_digest(self, schedule: Schedule) -> str:
        """The digest of `schedule` as `build` made it (the plan's, unless pending)."""
        return schedule_digest(schedule) if self.pending else self.digest

    def timing_value(self) -> str | None:
        """What `ScheduledJobsTiming` says of the schedule `build` makes (None: nothing, as
        while its timing is pending: check then asks the schedule itself)."""
        if not self.carry_timing or self.pending or self.since is None:
            return None
        return timing_stamp(self.job, self.since)


@dataclass(frozen=True)
class _Listed:
    """A schedule as the listing (visibility) shows it."""

    managed: bool
    digest: str | None
    paused: bool
    note: str | None


def check_unique(jobs: Iterable[JobSpec]) -> None:
    seen: set[str] = set()
    for job in jobs:
        if job.id in seen:
            raise CatalogError(f"job id {job.id!r} is declared twice")
        seen.add(job.id)


async def list_schedules(client: Client) -> dict[str, _Listed]:
    """Every schedule on the server by id, as the listing shows it."""
    found = {}
    async for entry in await client.list_schedules():
        state = entry.schedule.state if entry.schedule else None
        found[entry.id] = _Listed(
            managed=await entry.memo_value(MANAGED_MEMO_KEY, default=None) == MANAGED_MEMO_VALUE,
            digest=entry.typed_search_attributes.get(DIGEST_ATTRIBUTE),
            paused=bool(state and state.paused),
            note=state.note if state else None,
        )
    return found


async def managed_schedule_ids(client: Client) -> set[str]:
    """Ids of the schedules on the server that this project manages."""
    return {job_id for job_id, entry in (await list_schedules(client)).items() if entry.managed}


async def current_run(client: Client, description: ScheduleDescription) -> JobRun | None:
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


def _drift(job: JobSpec, paused: bool, note: str | None) -> list[str]:
    if paused and not job.paused:
        return [
            f"paused on the server ({note or 'no note'}) but not in the catalog; "
            f"kept paused: resume with `python -m schedules resume {job.id}`"
        ]
    return []


def compile_jobs(jobs: Iterable[JobSpec], task_queue: str, now: datetime) -> dict[str, Target]:
    """Compile every job, before anything is sent: a cron Temporal cannot express, a
    schedule larger than Temporal takes (`schedules.catalog.limits`) or a duplicate id stops the
    whole sync, every such problem listed at once."""
    jobs = list(jobs)
    check_unique(jobs)
    targets, problems = {}, []
    for job in jobs:
        try:
            schedule = compile_schedule(job, task_queue, now=now)
        except CatalogError as exc:
            problems.append(f"job {job.id!r}: {exc}")
            continue
        too_large = size_problem(job.model_dump(mode="json"), schedule)
        if too_large:
            problems.append(f"job {job.id!r}: {too_large}")
            continue
        targets[job.id] = Target(job, task_queue, schedule, schedule_digest(schedule))
    if problems:
        raise catalog_error(problems)
    return targets


def applied_at(description: ScheduleDescription) -> datetime:
    """When the server applied the schedule's last write (its creation or latest update)."""
    return description.info.last_updated_at or description.info.created_at


async def plan(
    client: Client,
    jobs: Iterable[JobSpec],
    task_queue: str,
    prune: bool = True,
    *,
    full: bool = False,
    now: datetime | None = None,
) -> tuple[SyncReport, dict[str, Target]]:
    """Compare the catalog with the server; change nothing.

    Returns the changes and each job's compiled `Target` (its `since` set for the jobs to
    create or update). `full` describes every job instead of trusting the listed digests;
    `now` (default: the clock) places the horizon of DST-compiled specs.
    """
    now = (now or datetime.now(UTC)).replace(microsecond=0)
    targets = compile_jobs(jobs, task_queue, now)
    stamp = await digest_attribute(client, register=False)
    report = await plan_against_listing(client, targets, now, prune=prune, full=full, stamp=stamp)
    return report, targets


@dataclass
class _Pass:
    """What every job's plan in one pass shares: the server, the clock, whether listed
    digests are trusted, and the bound on describe calls in flight."""

    client: Client
    now: datetime
    full: bool
    stamp: bool
    limit: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(CONCURRENCY))
    described: int = 0


async def plan_against_listing(
    client: Client,
    targets: dict[str, Target],
    now: datetime,
    *,
    prune: bool,
    full: bool,
    stamp: bool,
    progress: Progress = QUIET,
    retired: frozenset[str] = frozenset(),
) -> SyncReport:
    """The plan against one listing of the server's schedules. `retired`: engine jobs a
    prune deletes all the same (dispatchers beyond the shards, `schedules.sync.shards`).

    `stamp`: schedules carry the digest attribute; without it no listed digest is trusted
    (an update that cannot rewrite it would leave a stale one behind).
    """
    listed = await list_schedules(client)
    one = _Pass(client, now, full, stamp)

    async def counted(target: Target) -> Change:
        try:
            return await _plan_job(one, target, listed.get(target.job.id))
        finally:
            progress.advance()

    progress.phase("plan", len(targets))
    report = SyncReport(list(await asyncio.gather(*(counted(t) for t in targets.values()))))
    progress.close()
    report.described = one.described
    managed = {job_id for job_id, entry in listed.items() if entry.managed}
    report.managed = len(managed)
    if prune:
        # The engine's jobs are the fleet's whatever catalog this sync was given (a
        # `--without-engine` sync leaves theirs as they are): never pruned.
        for job_id in sorted(managed - set(targets) - (engine_job_ids() - retired)):
            report.changes.append(Change(job_id, "delete"))
    return report


async def _plan_job(one: _Pass, target: Target, entry: _Listed | None) -> Change:
    """One job's change: unchanged on the listing's word where its digest vouches for the
    schedule, else from its description, field by field."""
    job = target.job
    if (
        one.stamp
        and not one.full
        and entry is not None
        and entry.managed
        and entry.digest == target.digest
        and (entry.paused or not job.paused)  # else the catalog's pause must be applied
    ):
        return Change(job.id, "unchanged", drift=_drift(job, entry.paused, entry.note))
    async with one.limit:
        one.described += 1
        description = await schedule_or_none(one.client, job.id)
    if description is None:
        target.since, target.pending = one.now, True
        return Change(job.id, "create")
    if await description.memo_value(MANAGED_MEMO_KEY, default=None) != MANAGED_MEMO_VALUE:
        raise CatalogError(
            f"schedule {job.id!r} exists but is not managed by this project; "
            "rename the job or delete that schedule"
        )
    current = await current_run(one.client, description)
    old = await catalog_entry(one.client, description) or {}
    fields = _fields(target, description, old, one.now)
    _choose_since(target, description, current, fields, one.now)
    # A new timing replaces one that may still owe runs (`schedules.sync.edits`).
    before = current.timing if current is not None and target.pending else None
    if one.stamp and not fields:
        digest = await _digest(one, job.id, description, target.digest)
        if digest != target.digest:
            # Nothing the diff shows, yet not what this sync would send (a schedule from
            # before the digest, or an action this code builds differently): resend it so
            # the next sync can trust the listing.
            fields["digest"] = (digest, target.digest)
    state = description.schedule.state
    action = "update" if fields else "unchanged"
    return Change(job.id, action, fields, _drift(job, state.paused, state.note), before)


def _fields(
    target: Target, description: ScheduleDescription, old: dict[str, Any], now: datetime
) -> dict[str, tuple[Any, Any]]:
    """What differs between the schedule on the server (`old`: the catalog entry it was
    built from) and the job's target."""
    job = target.job
    fields = _field_changes(old, memo_entry(job))
    task_queue = description.schedule.action.task_queue
    if task_queue != (wanted := job_task_queue(job, target.task_queue)):
        fields["task_queue"] = (task_queue, wanted)
    # A DST-compiled spec is good for about ten years; it is recompiled once a year, and
    # when the tz database or the compiler changed (timing/calendars.py).
    stored = description.schedule.spec
    keep_forced_utc(target, stored, now)  # the server's tz database disagreed before
    compiled = target.schedule.spec
    if spec_outdated(stored, compiled):
        fields["calendars"] = (describe_spec(stored), describe_spec(compiled))
    if job.paused and not description.schedule.state.paused:
        fields["paused (on the server)"] = (False, True)
    # The run's bound (docs/catalog.md#how-long-a-run-may-live); none from a sync before it.
    bound = description.schedule.action.execution_timeout
    if bound != (wanted_bound := target.schedule.action.execution_timeout):
        shown = [format_duration(b) if b is not None else "none" for b in (bound, wanted_bound)]
        fields["run bound"] = (shown[0], shown[1])
    return fields


def _choose_since(
    target: Target,
    description: ScheduleDescription,
    current: JobRun | None,
    fields: dict[str, tuple[Any, Any]],
    now: datetime,
) -> None:
    """Since when the target's timing is in force: `now` (pending until the server says)
    for a new timing, the last write for an unstamped one, else what the schedule says."""
    timing_changed = any(name in fields for name in TIMING_FIELDS)
    if timing_changed or current is None:
        target.since, target.pending = now, True  # `now` stands in until the server says
    elif current.timing_pending or current.timing_since is None:
        # A sync that stopped between its two writes, or a schedule from before
        # timing_since: its timing took effect no later than its last write.
        target.since = applied_at(description)
        fields["timing_since"] = ("pending" if current.timing_pending else None, target.since)
    else:
        target.since = current.timing_since


async def _digest(
    one: _Pass, job_id: str, description: ScheduleDescription, expected: str
) -> str | None:
    """The schedule's digest attribute. The server reads a schedule's search attributes
    before it queries the schedule itself, which waits for writes in flight: right after a
    write (another sync's timing stamp, say) they can be older than the rest. Described
    again, they are not."""
    digest = description.typed_search_attributes.get(DIGEST_ATTRIBUTE)
    if digest == expected:
        return digest
    async with one.limit:
        again = await schedule_or_none(one.client, job_id)
    return digest if again is None else again.typed_search_attributes.get(DIGEST_ATTRIBUTE)
