"""Turn a `JobSpec` into the Temporal `Schedule` that fires it."""

from __future__ import annotations

from temporalio.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
)

from schedules.catalog import JobSpec
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


def job_run(job: JobSpec) -> JobRun:
    """The workflow input every run of `job` receives."""
    return JobRun(
        job_name=job.id,
        activity=job.activity,
        params=job.params,
        start_to_close_seconds=job.start_to_close.total_seconds(),
        heartbeat_seconds=job.heartbeat.total_seconds() if job.heartbeat else None,
        starting_deadline_seconds=(
            job.starting_deadline.total_seconds() if job.starting_deadline else None
        ),
        retry=job.retry,
    )


def compile_schedule(job: JobSpec, task_queue: str) -> Schedule:
    """Build the schedule: schedule id and workflow id are the job id."""
    return Schedule(
        action=ScheduleActionStartWorkflow(
            ScheduledJobWorkflow.run,
            job_run(job),
            id=job.id,
            task_queue=task_queue,
        ),
        spec=ScheduleSpec(
            cron_expressions=[job.cron],
            time_zone_name=job.timezone,
            jitter=job.jitter,
        ),
        policy=SchedulePolicy(overlap=OVERLAP[job.overlap], catchup_window=job.catchup_window),
        state=ScheduleState(paused=job.paused, note=job.description or None),
    )
