"""Slot dependencies (issue 23, docs/dependencies.md): what a dependency says, and what the
wait for one passes between the workflow and its activities.

A job (a catalog job or a runtime schedule) may name upstream jobs whose slots must have
completed before its own slot's work starts. Each `Dependency` names the upstream, how the
upstream's slots map onto ours (`slots`), how long they may take (`within`) and what to do
when they fail or are late (`on_failure`). The mapping and the judgement are in
`activities.dependencies.judge`; the wait is `workflows.dependencies`.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from timing import Timing

SlotMapping = Literal["same", "window", "latest"]
"""How an upstream's slots map onto one of ours (instants, never dates):

- `same`: the upstream's slot at our slot's instant;
- `window`: every upstream slot after our previous fire time, up to and including ours,
  `(previous, ours]` (a day's hourly slots before a nightly job: 23 or 25 on DST days);
- `latest`: the upstream's latest slot at or before ours.
"""

OnFailure = Literal["wait", "skip", "run"]
"""When a mapped upstream slot failed (or was skipped) or the deadline passed: keep
waiting (`wait`: a re-run or a backfill of the upstream releases us; `check` alerts past
the deadline), record our slot skipped (`skip`), or run anyway (`run`)."""

WaitState = Literal["ready", "waiting", "skip", "run"]

# The signal the worker sends a waiting run when an upstream slot settles (completed,
# failed, skipped): the run checks again at once instead of at its next poll.
UPSTREAM_SETTLED_SIGNAL = "upstream_settled"
# The PostgreSQL channel the ledger's trigger notifies on (worker/migrations/0021).
UPSTREAM_SETTLED_CHANNEL = "upstream_settled"
NOT_READY = "UpstreamNotReady"
MAX_FAILED = 20  # failed upstream slots a check keeps (and the audit reads back)


class Dependency(BaseModel):
    """One upstream of a job: a catalog job (`job`) or, for a runtime schedule, another
    runtime schedule of the same tenant, by name (`schedule`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    job: str | None = None
    schedule: str | None = None
    slots: SlotMapping
    within: timedelta
    on_failure: OnFailure = "wait"

    @model_validator(mode="after")
    def _one_upstream(self) -> Dependency:
        if (self.job is None) == (self.schedule is None):
            raise ValueError("give exactly one of job (a catalog job) and schedule")
        return self

    @property
    def upstream(self) -> str:
        """The upstream as people read it: a catalog job id, or `schedule '<name>'`."""
        return self.job if self.job is not None else f"schedule {self.schedule!r}"


class WaitInput(BaseModel):
    """One slot's wait for its upstreams (`check_upstream`, `await_upstream`)."""

    job_name: str  # our ledger name
    scheduled_at: datetime
    execution_id: int
    timing: Timing | None = None  # ours: a `window` starts at our previous fire time
    zone: str = "UTC"  # ours, for the times the wait shows
    depends_on: list[Dependency]
    tenant: str | None = None  # a runtime schedule's: whose names `schedule` means
    workflow_id: str
    run_id: str
    began_at: datetime  # when the run began to wait (the workflow's clock)
    # The workflow's clock at a check (`check_upstream`: a local activity's own times are
    # its worker's wall clock). The workflow code that sets it runs in the same worker as
    # the check, so every check has it; None only for a caller outside a workflow.
    checked_at: datetime | None = None


class UpstreamProgress(BaseModel):
    """How far one upstream is with the slots mapped onto ours."""

    upstream: str  # as written in the dependency
    ledger: str | None = None  # its job_executions.job_name (None: not found)
    zone: str = "UTC"
    mapped: int = 0
    done: int = 0
    # Counts and the first and last slot only: this travels in workflow history (a day of
    # minutes would be 1,440 times), ids and counts only.
    pending: int = 0
    pending_first: datetime | None = None
    pending_last: datetime | None = None
    # Mapped slots that settled without completing: (slot, status, error), the oldest
    # `MAX_FAILED` of `failed_count`.
    failed: list[tuple[datetime, str, str]] = Field(default_factory=list)
    failed_count: int = 0
    missing: str | None = None  # why the upstream could not be found

    @property
    def outstanding(self) -> bool:
        return bool(self.pending or self.failed_count or self.missing)


class WaitResult(BaseModel):
    """The judgement of one check: ready, still waiting, or a decision (skip, run)."""

    state: WaitState
    deadline: datetime
    overdue: bool = False  # waiting past the deadline (on_failure "wait")
    progress: str = ""  # what the Temporal UI shows while waiting
    reason: str | None = None  # why a skip or a run anyway
    upstreams: list[UpstreamProgress] = Field(default_factory=list)

    @property
    def settled(self) -> bool:
        return self.state != "waiting"


def deadline_of(scheduled_at: datetime, began_at: datetime, within: timedelta) -> datetime:
    """`within` after the slot's fire time, or after the run began to wait if that was
    later: a catch-up or backfill run of an old slot gets the whole `within` too."""
    return max(scheduled_at, began_at) + within
