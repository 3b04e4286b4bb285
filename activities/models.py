"""Inputs and results shared by workflows and activities.

Only ids, times and counts travel through workflow history; customer data stays in Postgres.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

Trigger = Literal["schedule", "direct"]

STALE_ATTEMPT = "StaleAttempt"
"""The error type of an attempt whose fencing token is no longer the slot's: it committed
nothing, and another attempt or workflow run carries the slot on."""


class ClaimInput(BaseModel):
    job_name: str
    scheduled_at: datetime
    trigger: Trigger
    workflow_id: str
    run_id: str
    # A run that starts later than this after its scheduled time is recorded as skipped.
    starting_deadline_seconds: float | None = None
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


class JobTiming(BaseModel):
    """When the job fires, as its schedule was built: for work that depends on its window."""

    cron: str | None = None
    interval_seconds: float | None = None
    timezone: str = "UTC"


class WorkInput(BaseModel):
    execution: ExecutionRef
    params: dict[str, Any] = Field(default_factory=dict)
    timing: JobTiming = Field(default_factory=JobTiming)


class WorkResult(BaseModel):
    counts: dict[str, int] = Field(default_factory=dict)
    # True when another run had already completed this slot: nothing was done.
    already_completed: bool = False


class FailureInput(BaseModel):
    execution_id: int
    run_id: str
    error: str
