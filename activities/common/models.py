"""Inputs and results shared by workflows and activities.

Only ids, times and counts travel through workflow history; customer data stays in Postgres.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from timing import Timing

Origin = Literal["scheduled", "catch-up", "manual", "backfill", "direct"]
"""How a run came about, in the one vocabulary of `job_executions.origin`, the Temporal UI
and the CLI: the schedule fired on time (`scheduled`); a missed fire time run or recorded
late (`catch-up`); an operator's trigger (`manual`); an older fire time run again
(`backfill`); a workflow started without a schedule (`direct`)."""


TimingField = Timing | None
"""When the job fires, carried typed from the catalog to the activities; None for a run
started without a schedule's timing."""

STALE_ATTEMPT = "StaleAttempt"
"""The error type of an attempt whose fencing token is no longer the slot's: it committed
nothing, and another attempt or workflow run carries the slot on."""


class ClaimInput(BaseModel):
    job_name: str
    scheduled_at: datetime
    origin: Origin | None = None
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
    runtime schedule's (`activities.runtime.models.RuntimeRunResult`) say it alike."""

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
    # A catalog job's `notify` (issue 40): the tenant whose channels get its notices. A
    # runtime schedule's go to its own tenant's.
    notify: str | None = None
    # The attempts the work made when none of them could record itself: a work activity run
    # as a local activity rolls back each failed attempt, its claim included (issue 42).
    attempts: int | None = None


class AttemptQuery(BaseModel):
    """Did the last Temporal attempt of an activity reach the database (take the slot over)?"""

    execution_id: int
    run_id: str  # the workflow run that scheduled the activity
    activity_seq: int
    attempt: int
