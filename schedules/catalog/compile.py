"""Turn a `JobSpec` into the Temporal `Schedule` that fires it."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
)
from temporalio.common import SearchAttributeKey

from core.queues import task_queue as fleet_queue
from jobs import kinds
from schedules.catalog.calendars import CALENDAR_FIELDS
from schedules.catalog.limits import MAX_DETAILS_BYTES, MAX_NOTE_BYTES, MAX_SUMMARY_BYTES, fit
from schedules.catalog.model import JobSpec
from timing.zones import zone
from workflows import JobRun, workflow_for

# Marks schedules this project owns, so sync never touches anyone else's.
MANAGED_MEMO_KEY = "managed-by"
MANAGED_MEMO_VALUE = "scheduled-jobs"
# The catalog entry a schedule was built from, in its action's memo (`compile_schedule`),
# so sync can diff field by field. Not in the run input: the run never reads it. (The
# schedule's own memo cannot be updated on a workflow-backed schedule: the server refuses
# it, so the action's memo, which every update replaces, carries it.)
CATALOG_MEMO_KEY = "catalog-entry"

# A Keyword search attribute on each schedule: the digest of what sync last set it to
# (`schedule_digest`), read from the schedule listing so an unchanged job needs no describe.
DIGEST_ATTRIBUTE = SearchAttributeKey.for_keyword("ScheduledJobsDigest")
# Since when the schedule has fired its current timing (`JobRun.timing_since`), with a
# fingerprint of that timing: what `check` needs of each schedule, readable from one listing
# instead of a describe per schedule (`timing_stamp`, `read_timing_stamp`).
TIMING_ATTRIBUTE = SearchAttributeKey.for_keyword("ScheduledJobsTiming")
# Part of every digest: bump it when the digest's inputs change meaning, so the next sync
# describes every job once and stamps the new digest.
# 2: the catalog entry moved from the run input to the action's memo; 3: the run's bound
DIGEST_VERSION = 3

OVERLAP = {
    "skip": ScheduleOverlapPolicy.SKIP,
    "buffer_one": ScheduleOverlapPolicy.BUFFER_ONE,
    "buffer_all": ScheduleOverlapPolicy.BUFFER_ALL,
    "cancel_other": ScheduleOverlapPolicy.CANCEL_OTHER,
    "terminate_other": ScheduleOverlapPolicy.TERMINATE_OTHER,
    "allow_all": ScheduleOverlapPolicy.ALLOW_ALL,
}


# The catalog fields that decide when a job fires; changing one restarts `timing_since`.
TIMING_FIELDS = (
    "cron",
    "interval",
    "timezone",
    "start_at",
    "end_at",
    *CALENDAR_FIELDS,
    "on_early_close",
)
# Of those, the ones left out of a timing's fingerprint while unset, so the stamps of jobs
# without a calendar read as they did before calendars existed.
OPTIONAL_TIMING_FIELDS = (*CALENDAR_FIELDS, "on_early_close")
# Fields the memo keeps only when set: entries without them read as before they existed.
OPTIONAL_ENTRY_FIELDS = (
    *OPTIONAL_TIMING_FIELDS,
    "max_run_time",
    "pause_after_failures",
    "notify",
)


def alert_after(job: JobSpec, now: datetime) -> timedelta | None:
    """How long after the job's last success the next one is overdue: the longest gap
    between its fire times (25h for a daily job across the autumn change) plus its jitter,
    `alert_grace` and its longest dependency `within` (a wait is not a late run). None for
    a job that fires fewer than twice.

    The gap is the longest in the job's own year at `now` and the next one: the value lives
    in the schedule until the next sync, so a sync in one year must not give the next
    year's longer gap (monthly-billing's October 2026, 31 days and an hour, say) a
    threshold an hour short, which pages while the run is on time."""
    timing = job.timing
    year = now.astimezone(zone(timing.timezone)).year
    gaps = [timing.longest_gap(y) for y in (year, year + 1)]
    gap = max((g for g in gaps if g is not None), default=None)
    # A run may wait for its upstream slots up to its longest `within` before it is late.
    waits = max((dep.within for dep in job.depends_on), default=timedelta(0))
    return None if gap is None else gap + job.jitter + job.alert_grace + waits


def job_run(
    job: JobSpec,
    timing_since: datetime | None = None,
    now: datetime | None = None,
    *,
    timing_pending: bool = False,
) -> JobRun:
    """The workflow input every run of `job` receives (`now` picks the years its alert
    threshold is computed for; `timing_pending`: see `JobRun.timing_pending`): ids, the
    work's options and the timing once; the catalog entry travels in the action's memo."""
    overdue = alert_after(job, now or datetime.now(UTC))
    return JobRun(
        job_name=job.id,
        activity=job.activity,
        workflow=job.workflow,
        one_transaction=job.one_transaction,
        chunked=job.chunked,
        params=job.params,
        start_to_close_seconds=job.timeout.total_seconds(),
        heartbeat_seconds=job.heartbeat.total_seconds() if job.heartbeat else None,
        starting_deadline_seconds=(
            job.starting_deadline.total_seconds() if job.starting_deadline else None
        ),
        retry=job.retry.settings(),
        timing=job.timing,
        catchup=job.catchup,
        max_missed=job.max_missed,
        timing_since=timing_since,
        alert_after_seconds=overdue.total_seconds() if overdue else None,
        timing_pending=timing_pending,
        depends_on=[dep.dependency() for dep in job.depends_on],
        pause_after_failures=job.pause_after_failures,
        notify=job.notify,
    )


def job_task_queue(job: JobSpec, task_queue: str) -> str:
    """The task queue `job`'s runs use, `task_queue` being the fleet's: its own, or its
    `dispatch` queue for a dispatcher kind (`core.queues`)."""
    kind = kinds().get(job.kind)
    return fleet_queue(task_queue, kind.queue) if kind is not None else task_queue


def compile_schedule(
    job: JobSpec,
    task_queue: str,
    timing_since: datetime | None = None,
    now: datetime | None = None,
    *,
    spec: ScheduleSpec | None = None,
    timing_pending: bool = False,
) -> Schedule:
    """Build the schedule: schedule id and workflow id are the job id; its runs go to the
    job's own task queue of the fleet whose queue is `task_queue` (`job_task_queue`).

    The spec is the job's `Timing.spec` (DST-exact; `now` places its horizon). `spec`,
    when given, is one already made for this job (sync compiles each job once per run: the
    plan compares it, then creates or updates with it). `timing_pending` marks a timing the
    server has yet to report applying (`schedules.sync.plan`).
    """
    run = job_run(job, timing_since, now, timing_pending=timing_pending)
    return Schedule(
        action=ScheduleActionStartWorkflow(
            workflow_for(run),
            run,
            id=job.id,
            task_queue=job_task_queue(job, task_queue),
            # Every run is bounded (docs/catalog.md#how-long-a-run-may-live).
            execution_timeout=job.lifetime,
            memo={CATALOG_MEMO_KEY: memo_entry(job)},
            # Shown by the Temporal UI on the schedule and on every run it starts; cut to
            # Temporal's user-metadata limits (the run input has the whole description).
            static_summary=fit(
                f"{job.id}: {job.description}" if job.description else job.id, MAX_SUMMARY_BYTES
            ),
            static_details=fit(
                f"owner: {job.owner or 'unset'}\n\n"
                f"runs: {job.schedule_text} ({job.timezone}){_on_days(job)}; "
                f"catch-up {job.catchup}; "
                f"overlap {job.overlap}",
                MAX_DETAILS_BYTES,
            ),
        ),
        spec=spec if spec is not None else job.timing.spec(now or datetime.now(UTC)),
        policy=SchedulePolicy(overlap=OVERLAP[job.overlap], catchup_window=job.catchup_window),
        state=ScheduleState(paused=job.paused, note=intent_note(job)),
    )


def memo_entry(job: JobSpec) -> dict[str, Any]:
    """The job's catalog entry as the action's memo keeps it; the calendar fields and
    `max_run_time` only when set, so the entries of jobs without them read as they did
    before those fields existed."""
    entry = job.model_dump(mode="json")
    for name in OPTIONAL_ENTRY_FIELDS:
        if entry.get(name) is None:
            entry.pop(name, None)
    return entry


def _on_days(job: JobSpec) -> str:
    """` on NYSE business days, following`, or '' for a job without a calendar."""
    rule = job.calendar_rule
    return "" if rule is None else f" on {rule.label}"


def intent_note(job: JobSpec) -> str:
    """The schedule's note: the job's intent as its owner wrote it (the cron in its own
    zone, the description, the owner), after the catalog's note if it has one.

    The Temporal UI shows a schedule's note on its page, and not the action's summary or
    details, nor a compiled schedule's zone (a DST job's calendars are in UTC): this is
    where an operator reads what the schedule is for. An operator's pause replaces it with
    the reason until `resume`, which puts it back."""
    parts = [job.note] if job.note else []
    parts.append(f"runs {job.schedule_text} in {job.timezone}{_on_days(job)}")
    if job.description:
        parts.append(job.description)
    parts.append(f"owner {job.owner or 'unset'}")
    return fit(" · ".join(parts), MAX_NOTE_BYTES)


def schedule_digest(schedule: Schedule) -> str:
    """A fingerprint of everything sync sets on a schedule: workflow, id, task queue, the UI
    summary and details, the job's run input, the catalog entry (the action's memo), spec,
    policy and the catalog's paused / note. The run's `timing_since` is left out: sync keeps
    it from the server. `timing_pending` is in: a schedule sync left pending never matches a
    finished one, so the next sync looks at it and finishes it.

    Two schedules compiled from the same catalog entry, task queue and year (a UTC-compiled
    spec's horizon moves with the year) have the same digest.
    """
    action = schedule.action
    assert isinstance(action, ScheduleActionStartWorkflow)
    (run,) = action.args
    assert isinstance(run, JobRun)
    content = {
        "version": DIGEST_VERSION,
        "workflow": action.workflow,
        "id": action.id,
        "task_queue": action.task_queue,
        "lifetime": action.execution_timeout,
        "summary": [action.static_summary, action.static_details],
        # Unset, `pause_after_failures` leaves the digest as before it existed.
        "run": run.model_dump(
            mode="json",
            exclude={"timing_since"}
            | ({"pause_after_failures"} if run.pause_after_failures is None else set())
            | ({"notify"} if run.notify is None else set()),
        ),
        "memo": action.memo,
        "spec": schedule.spec,
        "policy": schedule.policy,
        "state": {"paused": schedule.state.paused, "note": schedule.state.note},
    }
    text = json.dumps(content, sort_keys=True, default=_plain, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _plain(value: Any) -> Any:
    """What `json` cannot encode itself: a dataclass as its fields (shallow, `json` recurses;
    much cheaper than `dataclasses.asdict` over hundreds of calendar ranges), anything else
    (datetime, timedelta) as text."""
    if dataclasses.is_dataclass(value) and hasattr(value, "__dict__"):
        return vars(value)
    return str(value)


def _timing_fingerprint(job: JobSpec) -> str:
    fields = job.model_dump(mode="json", include=set(TIMING_FIELDS))
    for name in OPTIONAL_TIMING_FIELDS:
        if fields.get(name) is None:
            fields.pop(name, None)
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def timing_stamp(job: JobSpec, since: datetime) -> str:
    """The `ScheduledJobsTiming` value of a schedule whose timing took effect at `since`."""
    return f"{_timing_fingerprint(job)} {since.astimezone(UTC).isoformat()}"


def read_timing_stamp(value: str | None, job: JobSpec) -> datetime | None:
    """`since` from a `ScheduledJobsTiming` value, if it was written for `job`'s timing as
    the catalog has it now (None: absent, unreadable, or another timing: ask the schedule)."""
    fingerprint, _, since = (value or "").partition(" ")
    if not since or fingerprint != _timing_fingerprint(job):
        return None
    try:
        found = datetime.fromisoformat(since)
    except ValueError:
        return None
    return found if found.tzinfo is not None else None
