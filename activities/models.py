"""Inputs and results shared by workflows and activities.

Only ids, times and counts travel through workflow history; customer data stays in Postgres.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field

from timing import Timing

Trigger = Literal["schedule", "direct"]
"""Whether a schedule started the workflow; superseded by `Origin` in the record."""

Origin = Literal["scheduled", "catch-up", "manual", "backfill", "direct"]
"""How a run came about, in the one vocabulary of `job_executions.origin`, the Temporal UI
and the CLI: the schedule fired on time (`scheduled`); a missed fire time run or recorded
late (`catch-up`); an operator's trigger (`manual`); an older fire time run again
(`backfill`); a workflow started without a schedule (`direct`)."""


def origin_of_trigger(trigger: Trigger | None) -> Origin:
    """The origin a run of a worker of the previous release meant by its `trigger`."""
    return "direct" if trigger == "direct" else "scheduled"


def trigger_of(origin: Origin) -> Trigger:
    """The `trigger` a reader of the previous release expects beside `origin` in a run's
    result (`JobRunResult.trigger`, a compatibility field: see docs/architecture.md)."""
    return "direct" if origin == "direct" else "schedule"


def _timing_or_legacy(value: Any) -> Any:
    """A `Timing`, also from the `{cron, interval_seconds, timezone}` a workflow of the
    previous release sends (None when it carried neither cron nor interval). Removed in v6."""
    if isinstance(value, dict) and "interval_seconds" in value:
        if value.get("cron") is None and value.get("interval_seconds") is None:
            return None
        seconds = value.get("interval_seconds")
        return {
            "cron": value.get("cron"),
            "interval": timedelta(seconds=seconds) if seconds is not None else None,
            "timezone": value.get("timezone") or "UTC",
        }
    return value


TimingField = Annotated[Timing | None, BeforeValidator(_timing_or_legacy)]
"""When the job fires, carried typed from the catalog to the activities; None for a run
started without a schedule's timing."""

STALE_ATTEMPT = "StaleAttempt"
"""The error type of an attempt whose fencing token is no longer the slot's: it committed
nothing, and another attempt or workflow run carries the slot on."""


class ClaimInput(BaseModel):
    job_name: str
    scheduled_at: datetime
    origin: Origin | None = None
    trigger: Trigger | None = None  # what a workflow of v1/v2 sends instead (until v6)
    workflow_id: str
    run_id: str
    # A run that starts later than this after its scheduled time is recorded as skipped.
    starting_deadline_seconds: float | None = None
    # When the slot is due, if not at `scheduled_at`: a slot a business calendar moved
    # (the lateness and the future-slot check count from here).
    due_at: datetime | None = None
    # How long after the job's last success the next is overdue (exported for alerts).
    alert_after_seconds: float | None = None


class ClaimResult(BaseModel):
    execution_id: int
    # claimed: go ahead; completed / skipped: the slot is settled, do nothing.
    outcome: Literal["claimed", "completed", "skipped"]
    reason: str | None = None


class ExecutionRef(BaseModel):
    execution_id: int
    job_name: str
    scheduled_at: datetime


class WorkInput(BaseModel):
    execution: ExecutionRef
    params: dict[str, Any] = Field(default_factory=dict)
    timing: TimingField = None


class WorkResult(BaseModel):
    counts: dict[str, int] = Field(default_factory=dict)
    # True when another run had already completed this slot: nothing was done.
    already_completed: bool = False


class SlotOutcome(BaseModel):
    """How one slot's run ended, in workflow results (what the Temporal UI shows): ids and
    counts only. A catalog job's run (`workflows.models.JobRunResult`, `SlotRun`) and a
    runtime schedule's (`activities.runtime_models.RuntimeRunResult`) say it alike."""

    scheduled_at: datetime
    execution_id: int | None = None
    outcome: Literal["completed", "already_completed", "skipped", "superseded"]
    counts: dict[str, int] = Field(default_factory=dict)
    reason: str | None = None


class FailureInput(BaseModel):
    execution_id: int
    run_id: str
    error: str
    # A catalog job's `pause_after_failures` (issue 40): its schedule is paused once this
    # failure is the K-th in a row. A runtime schedule's is on its row.
    pause_after_failures: int | None = None


class AttemptQuery(BaseModel):
    """Did the last Temporal attempt of an activity reach the database (take the slot over)?"""

    execution_id: int
    run_id: str  # the workflow run that scheduled the activity
    activity_seq: int
    attempt: int
