"""What `check` judges and reports: the execution rows, schedule states and alerts, as data."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from activities.catchup.backfills import DroppedSlot

DEFAULT_GRACE = timedelta(minutes=15)
DEFAULT_LOOKBACK = timedelta(hours=24)
# Duration baseline: the completed runs before the one judged.
HISTORY = 20
MIN_HISTORY = 5
SLOW_FACTOR = 1.5
# Seconds-long jobs vary by more than 50% for no reason anyone should be paged about.
SLOW_MIN_EXCESS = timedelta(minutes=1)
# Fire times examined per job: bounds the work for a job that fires every few seconds.
MAX_FIRES = 1000
CATCHUP_GAP_PREFIX = "catch-up gap"
# A recent action started this long after its slot came from a backfill (or a catch-up).
BACKFILL_LATENESS = timedelta(minutes=5)

COMPLETED, FAILED, SKIPPED, RUNNING = "completed", "failed", "skipped", "running"
COMPENSATED = "compensated"  # a workflow job's run that failed and undid its steps


class Kind(StrEnum):
    NOT_COMPLETED = "not_completed"
    LAST_RUN_FAILED = "last_run_failed"
    MISSED_RUNS = "missed_runs"
    CATCHUP_GAP = "catchup_gap"
    SLOW_RUN = "slow_run"
    BACKFILL_SKIPPED = "backfill_skipped"
    DEAD_OUTBOX = "dead_outbox"
    SCHEDULE_NOT_REGISTERED = "schedule_not_registered"
    DEPENDENCY_OVERDUE = "dependency_overdue"
    TENANT_DEFERRED = "tenant_deferred"
    AUTO_PAUSED = "auto_paused"


@dataclass(frozen=True)
class Execution:
    """One `job_executions` row, as much of it as the check reads."""

    job_name: str
    scheduled_at: datetime
    status: str
    started_at: datetime
    finished_at: datetime | None = None
    error: str | None = None
    attempt: int = 0
    # Its wait for upstream slots (docs/dependencies.md), if it has dependencies: waiting,
    # ready, skipped, run_anyway or cancelled; until when; what it showed; how long it took.
    wait_status: str | None = None
    wait_deadline: datetime | None = None
    wait_progress: str | None = None
    waited: timedelta | None = None

    @property
    def duration(self) -> timedelta | None:
        """How long its work took: from its claim to its end, less its wait for upstreams."""
        if not self.finished_at:
            return None
        return self.finished_at - self.started_at - (self.waited or timedelta(0))

    @property
    def waiting(self) -> bool:
        """Still waiting for its upstream slots (its work has not started)."""
        return self.wait_status == "waiting"

    @property
    def catchup_gap(self) -> bool:
        return self.status == SKIPPED and (self.error or "").startswith(CATCHUP_GAP_PREFIX)


@dataclass(frozen=True)
class ScheduleState:
    """What Temporal says about a job's schedule."""

    exists: bool
    managed: bool = True
    paused: bool = False
    next_action_times: tuple[datetime, ...] = ()
    created_at: datetime | None = None
    # Since when the schedule's current timing has been in force (set by `sync`).
    timing_since: datetime | None = None
    # A sign that a backfill may have dropped slots: the server's skipped-overlap count
    # (described schedules) or a recent action started long after its slot (listed ones).
    backfilled: bool = False
    # The slots of the schedule's recent actions: started, if not recorded yet.
    started: tuple[datetime, ...] = ()
    # Backfilled slots the server skipped and nothing ran since (filled by `run_check`).
    dropped: tuple[DroppedSlot, ...] = ()


@dataclass(frozen=True)
class OutboxState:
    dead: int
    oldest_dead_at: datetime | None = None
    newest_dead_at: datetime | None = None


@dataclass(frozen=True)
class Alert:
    kind: Kind
    job: str  # a job id, "outbox", "runtime:<kind>" or "tenant:<tenant>"
    message: str
    examples: tuple[int, ...] = ()  # runtime schedules' ids the message names as examples


@dataclass
class JobStatus:
    job: str
    schedule: str  # the cron text or "every <interval>"
    timezone: str
    state: str  # active | paused | not registered | not managed | unknown
    last_run: Execution | None = None
    last_success: Execution | None = None
    next_due: datetime | None = None
    next_due_source: str | None = None  # temporal | catalog
    alerts: list[Alert] = field(default_factory=list)


@dataclass
class CheckReport:
    checked_at: datetime
    jobs: list[JobStatus]
    outbox: OutboxState | None
    outbox_alerts: list[Alert] = field(default_factory=list)
    runtime_alerts: list[Alert] = field(default_factory=list)  # by kind (`health.runtime`)
    # Why the check cannot tell (a server it could not reach); any makes the status unknown.
    errors: list[str] = field(default_factory=list)

    @property
    def alerts(self) -> list[Alert]:
        jobs = [a for job in self.jobs for a in job.alerts]
        return jobs + self.outbox_alerts + self.runtime_alerts

    @property
    def status(self) -> str:
        return "unknown" if self.errors else "alert" if self.alerts else "ok"

    @property
    def exit_code(self) -> int:
        return {"ok": 0, "alert": 1, "unknown": 2}[self.status]


def when(value: datetime | None) -> str:
    """A time in an alert's message: `2026-11-20 02:00:00Z`, `-` for none."""
    return value.strftime("%Y-%m-%d %H:%M:%SZ") if value else "-"


def iso_word(value: datetime) -> str:
    """A time as a command line takes it: one word."""
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def span(value: timedelta) -> str:
    """A duration in an alert's message: `1h05m`, `4m09s`, `7s`."""
    seconds = int(value.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
