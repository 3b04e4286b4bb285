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
read by `activities.catchup`), and only the server knows when that was. So a create, or an
update that changes the timing, is two writes: the schedule with its timing marked pending
(runs meanwhile count no missed time), then, once the server has it, the same schedule with
`timing_since` set to the server's own time of that write (`created_at`, `last_updated_at`).
The second write changes no spec, so the timing really did take effect at that instant. A
sync that stops between the two leaves a pending schedule, whose digest never matches a
finished one: the next sync describes it and stamps the time of its last write.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleDescription,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode

from activities.runtime_models import RUNTIME_ATTRIBUTES
from core.errors import CatalogError
from schedules.catalog.compile import (
    DIGEST_ATTRIBUTE,
    MANAGED_MEMO_KEY,
    MANAGED_MEMO_VALUE,
    TIMING_ATTRIBUTE,
    TIMING_FIELDS,
    compile_schedule,
    schedule_digest,
    timing_stamp,
)
from schedules.catalog.limits import size_problem
from schedules.catalog.model import JobSpec, catalog_error
from schedules.health.verify import Verdict, keep_forced_utc, verify_written
from schedules.progress import QUIET, Progress
from schedules.server.found import schedule_or_none
from schedules.server.retry import transient_rpc
from schedules.server.sync_lock import DEFAULT_LEASE_SECONDS, SyncLock, sync_lock
from schedules.sync.safety import (
    DEFAULT_MAX_PRUNE,
    apply_in_order,
    check_prune,
    wait_for_listing,
)
from timing.calendars import describe_spec, spec_outdated
from workflows import JobRun

logger = logging.getLogger(__name__)

# Describe calls in flight at once: enough for 1,000 schedules in seconds, not a flood.
_CONCURRENCY = 16

_KEYWORD = IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD
_warned: set[Any] = set()  # logged once: (namespace, attribute) pairs unusable, "write"


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
    described: int = 0
    """Schedules the plan described; the listing's digests vouched for the other jobs."""
    managed: int = 0
    """Schedules on the server this project manages, as the plan listed them."""
    verification: list[str] = field(default_factory=list)
    """What checking the written schedules on the server did (`schedules.health.verify`)."""
    unverified: list[Verdict] = field(default_factory=list)
    """Written schedules that still fire other times than intended, or could not be
    checked: the sync did not succeed."""

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


async def _list_schedules(client: Client) -> dict[str, _Listed]:
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
    return {job_id for job_id, entry in (await _list_schedules(client)).items() if entry.managed}


async def digest_attribute(client: Client, register: bool) -> bool:
    """Whether schedules in the client's namespace can carry the digest search attribute.

    With `register`, a missing attribute is added (a namespace change, so a dry run does
    not). False where it is missing and cannot be added, or cannot even be listed (a
    hosted namespace without operator permissions): sync then describes every job, and
    says so once per process.
    """
    return await _keyword_attribute(client, DIGEST_ATTRIBUTE.name, register)


async def timing_attribute(client: Client, register: bool) -> bool:
    """Whether schedules can carry `ScheduledJobsTiming` (registered like the digest). Where
    they cannot, `check` describes every schedule instead: correct, slower."""
    return await _keyword_attribute(client, TIMING_ATTRIBUTE.name, register)


async def runtime_attributes(client: Client, register: bool) -> bool:
    """Whether runtime schedules' runs can carry their search attributes (tenant, schedule,
    kind: `activities.runtime_models`), registered like the digest, so the Temporal UI
    filters one customer's runs. Where they cannot, the dispatcher starts runs without."""
    found = [await _keyword_attribute(client, key.name, register) for key in RUNTIME_ATTRIBUTES]
    return all(found)


async def _keyword_attribute(client: Client, name: str, register: bool) -> bool:
    namespace = client.namespace
    operator = client.operator_service

    async def registered() -> IndexedValueType.ValueType | None:
        listed = await operator.list_search_attributes(
            ListSearchAttributesRequest(namespace=namespace)
        )
        return listed.custom_attributes.get(name)

    try:
        found = await registered()
        if found is None and register:
            try:
                await operator.add_search_attributes(
                    AddSearchAttributesRequest(
                        namespace=namespace, search_attributes={name: _KEYWORD}
                    )
                )
                found = _KEYWORD
            except RPCError:
                found = await registered()
                if found is None:  # not added by a concurrent sync either
                    raise
    except RPCError as err:
        if transient_rpc(err):  # the server not (yet) reachable: the caller retries the sync
            raise
        _warn_once(
            namespace, name, f"cannot list or register it ({err.status.name}: {err.message})"
        )
        return False
    if found is None:  # not registered, and not asked to
        return False
    if found != _KEYWORD:
        kind = IndexedValueType.Name(found)
        _warn_once(namespace, name, f"it exists with type {kind}, not Keyword")
        return False
    return True


def _warn_once(namespace: str, name: str, why: str) -> None:
    if (namespace, name) in _warned:
        return
    _warned.add((namespace, name))
    who = "sync" if name == DIGEST_ATTRIBUTE.name else "check"
    logger.warning(
        "search attribute %s is not usable in namespace %s: %s; %s describes every "
        "schedule instead (correct, slower). To fix: temporal operator search-attribute "
        "create --namespace %s --name %s --type Keyword",
        name,
        namespace,
        why,
        who,
        namespace,
        name,
        extra={"namespace": namespace, "search_attribute": name},
    )


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
    report = await _plan(client, targets, now, prune=prune, full=full, stamp=stamp)
    return report, targets


async def _plan(
    client: Client,
    targets: dict[str, Target],
    now: datetime,
    *,
    prune: bool,
    full: bool,
    stamp: bool,
    progress: Progress = QUIET,
) -> SyncReport:
    """The plan against one listing of the server's schedules.

    `stamp`: schedules carry the digest attribute; without it no listed digest is trusted
    (an update that cannot rewrite it would leave a stale one behind).
    """
    listed = await _list_schedules(client)
    report = SyncReport()
    limit = asyncio.Semaphore(_CONCURRENCY)

    async def one(target: Target) -> Change:
        job = target.job
        entry = listed.get(job.id)
        if (
            stamp
            and not full
            and entry is not None
            and entry.managed
            and entry.digest == target.digest
            and (entry.paused or not job.paused)  # else the catalog's pause must be applied
        ):
            return Change(job.id, "unchanged", drift=_drift(job, entry.paused, entry.note))
        async with limit:
            report.described += 1
            description = await schedule_or_none(client, job.id)
        if description is None:
            target.since, target.pending = now, True
            return Change(job.id, "create")
        if await description.memo_value(MANAGED_MEMO_KEY, default=None) != MANAGED_MEMO_VALUE:
            raise CatalogError(
                f"schedule {job.id!r} exists but is not managed by this project; "
                "rename the job or delete that schedule"
            )
        current = await _current_run(client, description)
        old = current.definition if current else {}
        fields = _field_changes(old, job.model_dump(mode="json"))
        task_queue = description.schedule.action.task_queue
        if task_queue != target.task_queue:
            fields["task_queue"] = (task_queue, target.task_queue)
        # A DST-compiled spec is good for about ten years; it is recompiled once a year, and
        # when the tz database or the compiler changed (timing/calendars.py).
        stored = description.schedule.spec
        keep_forced_utc(target, stored, now)  # the server's tz database disagreed before
        compiled = target.schedule.spec
        if spec_outdated(stored, compiled):
            fields["calendars"] = (describe_spec(stored), describe_spec(compiled))
        state = description.schedule.state
        if job.paused and not state.paused:
            fields["paused (on the server)"] = (False, True)
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
        digest = description.typed_search_attributes.get(DIGEST_ATTRIBUTE)
        if stamp and not fields and digest != target.digest:
            # The server reads a schedule's search attributes before it queries the schedule
            # itself, which waits for writes in flight: right after a write (another sync's
            # timing stamp, say) they can be older than the rest. Described again, they are not.
            async with limit:
                again = await schedule_or_none(client, job.id)
            if again is not None:
                digest = again.typed_search_attributes.get(DIGEST_ATTRIBUTE)
        if stamp and not fields and digest != target.digest:
            # Nothing the diff shows, yet not what this sync would send (a schedule from
            # before the digest, or an action this code builds differently): resend it so
            # the next sync can trust the listing.
            fields["digest"] = (digest, target.digest)
        action = "update" if fields else "unchanged"
        return Change(job.id, action, fields, _drift(job, state.paused, state.note))

    async def counted(target: Target) -> Change:
        try:
            return await one(target)
        finally:
            progress.advance()

    progress.phase("plan", len(targets))
    report.changes = list(await asyncio.gather(*(counted(t) for t in targets.values())))
    progress.close()
    managed = {job_id for job_id, entry in listed.items() if entry.managed}
    report.managed = len(managed)
    if prune:
        for job_id in sorted(managed - set(targets)):
            report.changes.append(Change(job_id, "delete"))
    return report


async def sync(
    client: Client,
    jobs: Iterable[JobSpec],
    task_queue: str,
    prune: bool = True,
    dry_run: bool = False,
    *,
    full: bool = False,
    now: datetime | None = None,
    max_prune: float = DEFAULT_MAX_PRUNE,
    lock_wait: float = 60.0,
    lock_lease: float = DEFAULT_LEASE_SECONDS,
    progress: Progress = QUIET,
) -> SyncReport:
    """Apply the catalog: create, update what differs, delete what it no longer has.

    Every job is compiled and checked against Temporal's limits before the server is asked
    anything. The plan and the writes happen under the namespace's sync lock
    (`schedules.server.sync_lock`, waited for up to `lock_wait` seconds): one sync at a time.
    Creates and updates go first, deletes only after all of them succeeded, and a sync
    that would delete more than `max_prune` of the managed schedules changes nothing
    (`schedules.sync.safety`). A dry run takes no lock, writes nothing and leaves the prune
    guard to the caller (`check_prune` on the report). `full` describes every schedule
    rather than trusting the digests the listing shows, and so also repairs schedules
    edited by other means than sync. `now` as in `plan`. `progress` is told of each job
    planned and each schedule written (`schedules.progress`).
    """
    jobs = jobs.values() if isinstance(jobs, dict) else jobs
    now = (now or datetime.now(UTC)).replace(microsecond=0)
    targets = compile_jobs(jobs, task_queue, now)
    if dry_run:
        stamp = await digest_attribute(client, register=False)
        return await _plan(
            client, targets, now, prune=prune, full=full, stamp=stamp, progress=progress
        )
    async with sync_lock(client, lock_lease, lock_wait) as lock:
        stamp = await digest_attribute(client, register=True)
        if stamp and await timing_attribute(client, register=True):
            for target in targets.values():
                target.carry_timing = True
        await runtime_attributes(client, register=stamp)
        report = await _plan(
            client, targets, now, prune=prune, full=full, stamp=stamp, progress=progress
        )
        check_prune(report.deleted, report.managed, max_prune)
        await lock.ensure_held("its first write")
        await _apply(client, report, targets, stamp, lock, progress)
        progress.close()
        # A schedule that fires otherwise on the server is rewritten here: under the lock.
        await _verify(client, report, targets, now, stamp)
        # The next sync plans from the listing: release the lock once it shows this one.
        await _listing_shows(client, report, targets, stamp)
    logger.info(
        "sync: %d job(s), %d described, %d created, %d updated, %d deleted",
        len(targets),
        report.described,
        len(report.created),
        len(report.updated),
        len(report.deleted),
    )
    return report


async def _apply(
    client: Client,
    report: SyncReport,
    targets: dict[str, Target],
    stamp: bool,
    lock: SyncLock,
    progress: Progress = QUIET,
) -> None:
    """The report's changes in the safe order (`schedules.sync.safety.apply_in_order`)."""
    progress.phase("write", sum(c.action != "unchanged" for c in report.changes))

    async def apply(change: Change) -> None:
        try:
            await write(change)
        finally:
            progress.advance()

    async def write(change: Change) -> None:
        lock.ensure_lease_left(f"writing {change.job_id}")
        if change.action in ("create", "update"):
            target = targets[change.job_id]
            if change.action == "create":
                await _create(client, target, stamp)
            else:
                await _update(client, target, stamp)
            if target.pending:  # stamp the server's own time of applying the timing
                await _update(client, target, stamp, stamp_timing=True)
        elif change.action == "delete":
            try:
                await client.get_schedule_handle(change.job_id).delete()
            except RPCError as err:
                if err.status != RPCStatusCode.NOT_FOUND:  # a concurrent sync got there
                    raise

    await apply_in_order(report.changes, apply, lock.ensure_held, _CONCURRENCY)


async def _listing_shows(
    client: Client, report: SyncReport, targets: dict[str, Target], stamp: bool
) -> None:
    """Wait until the listing shows this sync's writes (`sync_safety.wait_for_listing`)."""

    async def listed() -> dict[str, tuple[bool, str | None]]:
        return {i: (e.managed, e.digest) for i, e in (await _list_schedules(client)).items()}

    digests = {job_id: target.digest for job_id, target in targets.items()}
    await wait_for_listing(listed, report.changes, digests if stamp else None)


async def _verify(
    client: Client, report: SyncReport, targets: dict[str, Target], now: datetime, stamp: bool
) -> None:
    """Check what was written on the server itself (`schedules.health.verify`): a job whose
    calendars in its own zone fire other times there is recompiled to UTC and rewritten."""
    written = [targets[job_id] for job_id in (*report.created, *report.updated)]
    if not written:
        return
    try:
        report.verification, report.unverified = await verify_written(
            client, written, now, lambda target: _update(client, target, stamp)
        )
    except RPCError as err:  # written, but not checked: not a success either
        why = f"could not check the written schedules: {err.status.name}: {err.message}"
        report.unverified = [Verdict(t.job.id, "unknown", why=why) for t in written]


def _with_digest(
    attributes: TypedSearchAttributes, digest: str, timing: str | None = None
) -> TypedSearchAttributes:
    """The schedule's search attributes with the digest and `ScheduledJobsTiming` set (None:
    removed) (an update replaces them all)."""
    ours = {DIGEST_ATTRIBUTE.name, TIMING_ATTRIBUTE.name}
    kept = [pair for pair in attributes if pair.key.name not in ours]
    pairs = [*kept, SearchAttributePair(DIGEST_ATTRIBUTE, digest)]
    if timing is not None:
        pairs.append(SearchAttributePair(TIMING_ATTRIBUTE, timing))
    return TypedSearchAttributes(pairs)


def _refused_digest(err: RPCError) -> bool:
    """Whether the server refused the write for one of sync's search attributes (not for
    anything else, such as its size: that is refused again without them)."""
    message = err.message or ""
    return err.status == RPCStatusCode.INVALID_ARGUMENT and (
        DIGEST_ATTRIBUTE.name in message or TIMING_ATTRIBUTE.name in message
    )


def _without_digest(target: Target, err: RPCError) -> None:
    # Right after the attribute is registered a server may not accept it yet; the schedule
    # is written without it and described again by the next sync. Said once, not per job.
    first = "write" not in _warned
    _warned.add("write")
    logger.log(
        logging.WARNING if first else logging.DEBUG,
        "schedule %s: written without search attribute %s (%s); the next sync describes it",
        target.job.id,
        DIGEST_ATTRIBUTE.name,
        err.message,
        extra={"job": target.job.id},
    )


def applied_at(description: ScheduleDescription) -> datetime:
    """When the server applied the schedule's last write (its creation or latest update)."""
    return description.info.last_updated_at or description.info.created_at


async def _create(client: Client, target: Target, stamp: bool) -> None:
    job_id, memo = target.job.id, {MANAGED_MEMO_KEY: MANAGED_MEMO_VALUE}
    schedule = target.build()
    attributes = _with_digest(
        TypedSearchAttributes.empty, target.built_digest(schedule), target.timing_value()
    )
    try:
        try:
            await client.create_schedule(
                job_id, schedule, memo=memo, search_attributes=attributes if stamp else None
            )
        except RPCError as err:
            if not stamp or not _refused_digest(err):
                raise
            _without_digest(target, err)
            await client.create_schedule(job_id, target.build(), memo=memo)
    except ScheduleAlreadyRunningError:
        # A concurrent sync created it first: make sure it matches.
        await _update(client, target, stamp)


async def _update(
    client: Client, target: Target, stamp: bool, *, stamp_timing: bool = False
) -> None:
    """Write the target over the schedule.

    `stamp_timing`: the second write of a new timing. The schedule must still hold the
    pending run input the first write sent (else a later write replaced it, and its writer
    finishes it); then the same schedule goes back with `timing_since` set to the server's
    time of applying that write, and no longer pending.
    """
    pending = _run_of(target.build()) if stamp_timing else None

    async def replace(current: ScheduleUpdateInput, digest: bool = stamp) -> ScheduleUpdate | None:
        if pending is not None:
            if not _same_run(await _current_run(client, current.description), pending):
                return None
            target.since, target.pending = applied_at(current.description), False
        schedule = target.build()
        written = target.built_digest(schedule)
        # An operator's pause survives; the catalog can only add a pause, not lift one.
        state = current.description.schedule.state
        if state.paused and not schedule.state.paused:
            schedule.state.paused = True
            schedule.state.note = state.note
        attributes = current.description.typed_search_attributes
        return ScheduleUpdate(
            schedule=schedule,
            search_attributes=(
                _with_digest(attributes, written, target.timing_value()) if digest else None
            ),
        )

    handle = client.get_schedule_handle(target.job.id)
    try:
        await handle.update(replace)
    except RPCError as err:
        if not stamp or not _refused_digest(err):
            raise
        _without_digest(target, err)
        await handle.update(lambda current: replace(current, digest=False))


def _run_of(schedule: Schedule) -> JobRun:
    action = schedule.action
    assert isinstance(action, ScheduleActionStartWorkflow)
    (run,) = action.args
    assert isinstance(run, JobRun)
    return run


def _same_run(found: JobRun | None, sent: JobRun) -> bool:
    """Whether the server holds the run input `sent` (its timing stamp aside)."""
    if found is None:
        return False
    keep = {"timing_since"}
    return found.model_dump(mode="json", exclude=keep) == sent.model_dump(mode="json", exclude=keep)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def format_report(report: SyncReport, dry_run: bool) -> str:
    """The human-readable account of a sync, field by field."""
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
    lines += [f"verified      {line}" for line in report.verification]
    return "\n".join(lines)
