"""The workflows' inputs and results: pydantic models, defined outside the sandbox.

Temporal's sandbox imports a workflow's module afresh for every workflow run; pydantic
builds a model's validators when its class is defined, so models in a sandboxed module cost
every run their schema generation (a third of a worker's CPU in bench/fleet.py's profile).
This module is passed through the sandbox (`worker.run.PASSTHROUGH`): built once per
process. It holds no workflow logic, only data and its validation, which are deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, Field
from temporalio import workflow
from temporalio.common import RetryPolicy

# Passed through in any sandbox, also one not configured with `worker.run.PASSTHROUGH`.
with workflow.unsafe.imports_passed_through():
    from activities.catchup.missed import PlanResult
    from activities.common.dependency_models import Dependency
    from activities.common.models import (
        ClaimResult,
        ExecutionRef,
        Origin,
        SlotOutcome,
        TimingField,
        WorkResult,
    )
    from timing import Timing


STEPS_ID_SUFFIX = "/steps"
"""A workflow job's steps run as a child named `<run's workflow id>/steps`: the longest id
the engine builds, so `schedules/limits.py` holds job ids to what it leaves."""


# Bookkeeping activities (they read and write the database, nothing else) retry until the
# database is back, for up to an hour: one set of settings for every such call.
DATABASE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30)
)
DATABASE_DEADLINE = timedelta(hours=1)
BOOKKEEPING: dict[str, Any] = {
    "start_to_close_timeout": timedelta(seconds=30),
    "schedule_to_close_timeout": DATABASE_DEADLINE,
    "retry_policy": DATABASE_RETRY,
}


def work_timeouts(start_to_close_seconds: float, heartbeat_seconds: float | None) -> dict[str, Any]:
    """The timeouts of a work activity or a step, from its job's seconds: no heartbeat
    timeout when the job sets none."""
    return {
        "start_to_close_timeout": timedelta(seconds=start_to_close_seconds),
        "heartbeat_timeout": timedelta(seconds=heartbeat_seconds) if heartbeat_seconds else None,
    }


class RetrySettings(BaseModel):
    """Retry policy of a job's work activity (or of each step of a workflow job)."""

    initial_interval_seconds: float = Field(default=5.0, gt=0)
    backoff_coefficient: float = Field(default=2.0, ge=1)
    maximum_interval_seconds: float = Field(default=300.0, gt=0)
    maximum_attempts: int = Field(default=10, ge=0)  # 0: unlimited

    def policy(self) -> RetryPolicy:
        return RetryPolicy(
            initial_interval=timedelta(seconds=self.initial_interval_seconds),
            backoff_coefficient=self.backoff_coefficient,
            maximum_interval=timedelta(seconds=self.maximum_interval_seconds),
            maximum_attempts=self.maximum_attempts,
        )


class StepOptions(BaseModel):
    """Timeouts and retries of each step, from the job's catalog entry."""

    start_to_close_seconds: float = Field(default=3600.0, gt=0)
    heartbeat_seconds: float | None = Field(default=60.0, gt=0)
    retry: RetrySettings = Field(default_factory=RetrySettings)


class WorkflowJobInput(BaseModel):
    """What `ScheduledJobWorkflow` starts a workflow kind's workflow with."""

    execution: ExecutionRef
    run_id: str  # the ScheduledJobWorkflow run that holds the slot
    params: dict[str, Any] = Field(default_factory=dict)
    timing: TimingField = None
    options: StepOptions = Field(default_factory=StepOptions)
    headline: str = ""  # "**job** · local time · kind", the first line of the details


class JobRun(BaseModel):
    """The workflow's input, fixed in the schedule's action by `schedules sync`."""

    job_name: str
    activity: str  # the work activity of a kind that does its slot in one activity
    # A workflow kind's workflow type instead: run as a child workflow of steps (see
    # workflows/steps.py); `activity` is then empty.
    workflow: str | None = None
    # The kind works a slot in one transaction (`JobKind.slot_work`): the work activity
    # plans the run, claims its first slot and works it in that transaction, no `begin_run`
    # (`activities.run.begin.begin_and_work`). Absent from inputs a sync before v6 wrote.
    one_transaction: bool = False
    # The kind works in fenced chunks (`JobKind.chunked`, read by the engine from its work):
    # the work activity plans the run, claims its first slot and does its first chunk in
    # one transaction, completing the slot there if its work ended; else the work goes on
    # from the saved progress in the work activity's fenced chunks (`ChunkedJobWorkflow`,
    # which sync starts for such jobs). Absent from inputs a sync before v7-chunked wrote.
    chunked: bool = False
    params: dict[str, Any] = Field(default_factory=dict)
    start_to_close_seconds: float = Field(default=3600.0, gt=0)
    heartbeat_seconds: float | None = Field(default=60.0, gt=0)
    starting_deadline_seconds: float | None = Field(default=None, gt=0)
    retry: RetrySettings = Field(default_factory=RetrySettings)
    # When the fire times are (None: a run without a schedule's timing, which covers its
    # own slot only) and what to do with missed ones (see activities/catchup/missed.py).
    timing: Timing | None = None
    catchup: Literal["skip", "latest", "all"] = "latest"
    max_missed: int | None = None
    # How long after the last success the next one is overdue: the longest gap between
    # fire times + jitter + alert_grace. Recorded with each claim and exported as a metric.
    alert_after_seconds: float | None = None
    # Since when the current timing has been in force (the server's own time of applying
    # it): missed runs are never counted from before it, so changing a job's cron does not
    # invent missed runs. `timing_pending`: sync has applied the timing but not yet stamped
    # that time (it does so in a second write); runs meanwhile count no missed time.
    timing_since: datetime | None = None
    timing_pending: bool = False
    # The upstream slots each slot waits for before its work (docs/dependencies.md).
    depends_on: list[Dependency] = Field(default_factory=list)
    # Pause the schedule after this many consecutive failed slots (issue 40; None: never).
    pause_after_failures: int | None = None
    # The tenant whose notice channels get this job's notices (issue 40; None: none).
    notify: str | None = None


class SlotRun(SlotOutcome):
    """One (job, scheduled time) this workflow ran or settled."""


class JobRunResult(SlotOutcome):
    """What the run did, as shown in the Temporal UI: ids and counts only."""

    job_name: str
    # Missed earlier slots this run caught up on (oldest first), and those it skipped.
    caught_up: list[SlotRun] = Field(default_factory=list)
    missed_skipped: int = 0
    catchup_gap: int = 0
    # How the run came about, in the one vocabulary (`activities.common.models.Origin`, decided by
    # `activities.catchup.missed.run_origin`).
    origin: Origin = "scheduled"


@dataclass(frozen=True)
class Begun:
    """What the start of a `ScheduledJobWorkflow` run settled: its own slot, the plan, and
    the claim `begin_run` made with it (of `plan.run[0]`; none on the path of runs before
    its patch), and the work of that slot when the work activity began the run (patch
    `begin-in-work`). Here, outside the sandbox: built once, not per workflow run."""

    scheduled_at: datetime
    plan: PlanResult
    claims: dict[datetime, ClaimResult]
    worked: dict[datetime, WorkResult] = field(default_factory=dict)
