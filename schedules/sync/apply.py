"""Apply a sync: under the namespace's lock, plan, then write in the safe order.

Creates and updates go first, deletes last (`schedules.sync.safety`). A create, or an
update that changes the timing, is two writes: the schedule with its timing marked pending,
then the same schedule with `timing_since` set to the server's own time of that write (see
`schedules.sync.plan`). Every schedule written is then checked on the server
(`schedules.health.verify`), and the lock is released once the listing shows the writes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.common import TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode

from schedules.catalog.compile import (
    MANAGED_MEMO_KEY,
    MANAGED_MEMO_VALUE,
)
from schedules.catalog.model import JobSpec
from schedules.health.verify import Verdict, verify_written
from schedules.progress import QUIET, Progress
from schedules.server.sync_lock import DEFAULT_LEASE_SECONDS, SyncLock, sync_lock
from schedules.sync.attributes import (
    digest_attribute,
    outcome_attribute,
    refused_digest,
    runtime_attributes,
    timing_attribute,
    with_digest,
    without_digest,
)
from schedules.sync.edits import decide_stranded, start_kept
from schedules.sync.plan import (
    CONCURRENCY,
    Target,
    applied_at,
    compile_jobs,
    current_run,
    list_schedules,
    plan_against_listing,
)
from schedules.sync.report import Change, SyncReport
from schedules.sync.safety import (
    DEFAULT_MAX_PRUNE,
    apply_in_order,
    check_prune,
    wait_for_listing,
)
from schedules.sync.sessions import start_sessions
from schedules.sync.shards import ShardPlan, record_shards
from workflows import JobRun

logger = logging.getLogger(__name__)


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
    conninfo: str | None = None,
    shards: ShardPlan | None = None,
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

    `conninfo` (PostgreSQL): a timing edit never drops a slot the timing before still owed
    (`schedules.sync.edits`): each is run or recorded as dropped, by the job's catch-up
    policy, the edit taking effect at `now`; recorded before the first write (PostgreSQL out
    of reach then: `DatabaseUnavailableError`, nothing changed). Without it, stranded slots
    are not looked for. `shards` (with `conninfo`): the dispatch shards' change, recorded
    after the writes, under the lock (`schedules.sync.shards`); its extra dispatchers are
    pruned once their count no longer stands.
    """
    jobs = jobs.values() if isinstance(jobs, dict) else jobs
    now = (now or datetime.now(UTC)).replace(microsecond=0)
    targets = compile_jobs(jobs, task_queue, now)
    retired = shards.retired if shards is not None else frozenset()
    if dry_run:
        stamp = await digest_attribute(client, register=False)
        return await plan_against_listing(
            client, targets, now, prune=prune, full=full, stamp=stamp, progress=progress,
            retired=retired,
        )  # fmt: skip
    async with sync_lock(client, lock_lease, lock_wait) as lock:
        stamp = await digest_attribute(client, register=True)
        if stamp and await timing_attribute(client, register=True):
            for target in targets.values():
                target.carry_timing = True
        await runtime_attributes(client, register=stamp)
        await outcome_attribute(client, register=stamp)
        report = await plan_against_listing(
            client, targets, now, prune=prune, full=full, stamp=stamp, progress=progress,
            retired=retired,
        )  # fmt: skip
        check_prune(report.deleted, report.managed, max_prune)
        if conninfo is not None:  # recorded before any write (`schedules.sync.edits`)
            await decide_stranded(conninfo, report, targets, now)
        await lock.ensure_held("its first write")
        await _apply(client, report, targets, stamp, lock, progress)
        progress.close()
        # A schedule that fires otherwise on the server is rewritten here: under the lock.
        await _verify(client, report, targets, now, stamp)
        await start_kept(client, report)
        await start_sessions(client, (target.job for target in targets.values()))
        # The next sync plans from the listing: release the lock once it shows this one.
        await _listing_shows(client, report, targets, stamp)
        if shards is not None and conninfo is not None:  # its dispatchers exist by now
            report.shards_from = await record_shards(conninfo, shards, max(now, datetime.now(UTC)))
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

    await apply_in_order(report.changes, apply, lock.ensure_held, CONCURRENCY)


async def _listing_shows(
    client: Client, report: SyncReport, targets: dict[str, Target], stamp: bool
) -> None:
    """Wait until the listing shows this sync's writes (`sync_safety.wait_for_listing`)."""

    async def listed() -> dict[str, tuple[bool, str | None]]:
        return {i: (e.managed, e.digest) for i, e in (await list_schedules(client)).items()}

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


async def _create(client: Client, target: Target, stamp: bool) -> None:
    job_id, memo = target.job.id, {MANAGED_MEMO_KEY: MANAGED_MEMO_VALUE}
    schedule = target.build()
    attributes = with_digest(
        TypedSearchAttributes.empty, target.built_digest(schedule), target.timing_value()
    )
    try:
        try:
            await client.create_schedule(
                job_id, schedule, memo=memo, search_attributes=attributes if stamp else None
            )
        except RPCError as err:
            if not stamp or not refused_digest(err):
                raise
            without_digest(target.job.id, err)
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
            if not _same_run(await current_run(client, current.description), pending):
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
                with_digest(attributes, written, target.timing_value()) if digest else None
            ),
        )

    handle = client.get_schedule_handle(target.job.id)
    try:
        await handle.update(replace)
    except RPCError as err:
        if not stamp or not refused_digest(err):
            raise
        without_digest(target.job.id, err)
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
