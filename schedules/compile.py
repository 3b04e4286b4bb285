"""Turn a `JobSpec` into the Temporal `Schedule` that fires it."""

from __future__ import annotations

from datetime import UTC, datetime

from temporalio.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
)

from schedules.catalog import JobSpec
from schedules.timing import compile_spec
from workflows import JobRun, ScheduledJobWorkflow

# Marks schedules this project owns, so sync never touches anyone else's.
MANAGED_MEMO_KEY = "managed-by"
MANAGED_MEMO_VALUE = "scheduled-jobs"

OVERLAP = {
    "skip": ScheduleOverlapPolicy.SKIP,
    "buffer_one": ScheduleOverlapPolicy.BUFFER_ONE,
    "buffer_all": ScheduleOverlapPolicy.BUFFER_ALL,
    "cancel_other": ScheduleOverlapPolicy.CANCEL_OTHER,
    "terminate_other": ScheduleOverlapPolicy.TERMINATE_OTHER,
    "allow_all": ScheduleOverlapPolicy.ALLOW_ALL,
}


# The catalog fields that decide when a job fires; changing one restarts `timing_since`.
TIMING_FIELDS = ("cron", "interval", "timezone", "start_at", "end_at")


def job_run(job: JobSpec, timing_since: datetime | None = None) -> JobRun:
    """The workflow input every run of `job` receives."""
    return JobRun(
        job_name=job.id,
        activity=job.activity,
        params=job.params,
        start_to_close_seconds=job.timeout.total_seconds(),
        heartbeat_seconds=job.heartbeat.total_seconds() if job.heartbeat else None,
        starting_deadline_seconds=(
            job.starting_deadline.total_seconds() if job.starting_deadline else None
        ),
        retry=job.retry.settings(),
        cron=job.cron,
        interval_seconds=job.interval.total_seconds() if job.interval else None,
        timezone=job.timezone,
        catchup=job.catchup,
        max_missed=job.max_missed,
        jitter_seconds=job.jitter.total_seconds(),
        timing_since=timing_since,
        definition=job.model_dump(mode="json"),
    )


def compile_schedule(
    job: JobSpec,
    task_queue: str,
    timing_since: datetime | None = None,
    now: datetime | None = None,
) -> Schedule:
    """Build the schedule: schedule id and workflow id are the job id.

    A cron job's spec comes from `schedules.timing` (DST-exact; `now` places its horizon).
    """
    return Schedule(
        action=ScheduleActionStartWorkflow(
            ScheduledJobWorkflow.run,
            job_run(job, timing_since),
            id=job.id,
            task_queue=task_queue,
        ),
        spec=compile_spec(
            job.cron,
            job.timezone,
            start_at=job.start_at,
            end_at=job.end_at,
            jitter=job.jitter,
            now=now or datetime.now(UTC),
        )
        if job.cron
        else ScheduleSpec(
            intervals=[ScheduleIntervalSpec(every=job.interval)] if job.interval else [],
            time_zone_name=job.timezone,
            start_at=job.start_at,
            end_at=job.end_at,
            jitter=job.jitter,
        ),
        policy=SchedulePolicy(overlap=OVERLAP[job.overlap], catchup_window=job.catchup_window),
        state=ScheduleState(paused=job.paused, note=job.note or None),
    )
