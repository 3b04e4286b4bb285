"""The job catalog: jobs declared in a catalog file (the packaged `schedules/jobs.toml`,
`--catalog FILE` or `SCHEDULES_CATALOG`) beside the engine's own (`schedules/engine.toml`),
validated as `JobSpec` models.

Validation covers the whole catalog before anything reaches Temporal and reports every
problem at once, each naming the job, the field and the value.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from activities.catchup.missed import MAX_CONSIDERED
from activities.common.lifetime import run_lifetime, wait_bound, work_bound
from activities.runtime.shards import DEFAULT_SHARDS
from core.errors import CatalogError
from jobs import kinds
from schedules.catalog import limits
from schedules.catalog.calendars import (
    CALENDARS_TABLE,
    calendar_problems,
    define_calendar,
    parse_calendars,
)
from schedules.catalog.dependencies import DependencySpec, dependency_problems, own_problems
from schedules.catalog.durations import Duration
from schedules.catalog.files import read_catalog, with_engine_jobs
from schedules.catalog.problems import (
    Problems,
    format_error,
    params_problems,
    short,
    timing_problems,
)
from timing import Timing
from timing.business import BusinessCalendar, CalendarRule, OnEarlyClose, OnHoliday
from timing.value import ChosenZoneName, CronText, Instant
from workflows import RetrySettings

_KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")

Overlap = Literal[
    "skip", "buffer_one", "buffer_all", "cancel_other", "terminate_other", "allow_all"
]
Catchup = Literal["skip", "latest", "all"]


class RetrySpec(BaseModel):
    """Retry policy of the job's work activity."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Temporal keeps it as an int32; 0 (Temporal's "unlimited") is refused: every run has
    # a bounded lifetime (`JobSpec.lifetime`).
    maximum_attempts: int = Field(default=10, le=2**31 - 1)
    initial_interval: Duration = timedelta(seconds=5)
    backoff_coefficient: float = Field(default=2.0, ge=1, le=100)
    maximum_interval: Duration = timedelta(minutes=5)

    @field_validator("maximum_attempts")
    @classmethod
    def _bounded(cls, value: int) -> int:
        if value < 1:
            raise ValueError(
                f"must be at least 1, got {value} (0, unlimited, is not taken: every run "
                "has a bounded lifetime, docs/catalog.md#how-long-a-run-may-live)"
            )
        return value

    @field_validator("initial_interval", "maximum_interval")
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("must be longer than 0s")
        return value

    @model_validator(mode="after")
    def _ordered(self) -> RetrySpec:
        if self.maximum_interval < self.initial_interval:
            raise ValueError(
                f"maximum_interval: {self.maximum_interval} is shorter than initial_interval "
                f"{self.initial_interval}"
            )
        return self

    def settings(self) -> RetrySettings:
        return RetrySettings(
            initial_interval_seconds=self.initial_interval.total_seconds(),
            backoff_coefficient=self.backoff_coefficient,
            maximum_interval_seconds=self.maximum_interval.total_seconds(),
            maximum_attempts=self.maximum_attempts,
        )


class JobSpec(BaseModel):
    """One scheduled job: when it runs, how missed and overlapping runs are treated, what it runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    description: str = ""
    owner: str = ""
    kind: str
    params: dict[str, Any] = Field(default_factory=dict)
    # The timing's fields, refused by the `Timing`'s own types (`timing.value`).
    cron: CronText | None = None
    interval: Duration | None = None
    timezone: ChosenZoneName
    start_at: Instant | None = None
    end_at: Instant | None = None
    jitter: Duration = timedelta(0)
    # Business days (`schedules.catalog.calendars`); the definition comes from the name.
    calendar: str | None = None
    on_holiday: OnHoliday | None = None
    # What a fire time after a market's early close does (`timing.business`): keep, close, skip.
    on_early_close: OnEarlyClose | None = None
    calendar_definition: BusinessCalendar | None = None
    overlap: Overlap = "skip"
    catchup: Catchup = "latest"
    max_missed: int | None = None
    catchup_window: Duration = timedelta(days=1)
    starting_deadline: Duration | None = None
    timeout: Duration = timedelta(hours=1)
    heartbeat: Duration | None = timedelta(minutes=1)
    retry: RetrySpec = Field(default_factory=RetrySpec)
    # The longest a run may live (its execution timeout); None: computed from the fields
    # above (`lifetime`, docs/catalog.md#how-long-a-run-may-live).
    max_run_time: Duration | None = None
    paused: bool = False
    note: str = ""
    alert_grace: Duration = timedelta(minutes=15)
    # Pause the schedule after this many consecutive failed slots (issue 40; None: never).
    pause_after_failures: int | None = Field(default=None, ge=1, le=1000)
    # The tenant whose notice channels (`schedules tenants notify set`) get this job's
    # notices of failed, auto-paused, lost and late slots (docs/notices.md).
    notify: str | None = None
    # Upstream jobs whose slots must complete before each slot's work (docs/dependencies.md).
    depends_on: list[DependencySpec] = Field(default_factory=list)

    @field_validator("id")
    @classmethod
    def _kebab(cls, value: str) -> str:
        if not _KEBAB.match(value):
            raise ValueError(f"must be kebab-case like 'invoice-reminders', got {value[:80]!r}")
        too_long = limits.id_problem(value)
        if too_long:
            raise ValueError(too_long)
        return value

    _define_calendar = model_validator(mode="before")(define_calendar)

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        if value not in kinds():
            raise ValueError(
                f"unknown job kind {value!r}; known kinds: {', '.join(sorted(kinds()))}"
            )
        return value

    @field_validator("catchup_window")
    @classmethod
    def _window(cls, value: timedelta) -> timedelta:
        if value < timedelta(seconds=10):
            raise ValueError(f"must be at least 10s (Temporal's minimum), got {value}")
        return value

    @field_validator("timeout", "heartbeat", "starting_deadline", "max_run_time")
    @classmethod
    def _positive(cls, value: timedelta | None) -> timedelta | None:
        # "0s" would otherwise mean "none" for heartbeat and starting_deadline, and a run
        # that can never finish for timeout: leave the key out instead (heartbeat: 1m).
        if value is not None and value <= timedelta(0):
            raise ValueError("must be longer than 0s")
        return value

    @field_validator("notify")
    @classmethod
    def _tenant(cls, value: str | None) -> str | None:
        # The tenant of `schedules tenants notify set TENANT`: a name as tenants have.
        if value is not None and not (value.strip() and len(value) <= 200 and value.isprintable()):
            raise ValueError(f"must name a tenant (1 to 200 printable characters), got {value!r}")
        return value

    @field_validator("max_missed")
    @classmethod
    def _considered(cls, value: int | None) -> int | None:
        # activities/catchup/missed.py looks at no more missed times than this.
        if value is not None and value > 1000:
            raise ValueError(f"must be at most 1000, got {value}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> JobSpec:
        problems = calendar_problems(self) or timing_problems(self)
        if self.catchup == "all" and (self.max_missed is None or self.max_missed < 1):
            problems.append(
                f"max_missed: catchup 'all' needs max_missed >= 1, got {self.max_missed}"
            )
        if self.catchup != "all" and self.max_missed is not None:
            problems.append(f"max_missed: only applies to catchup 'all', not {self.catchup!r}")
        if self.heartbeat is not None and self.heartbeat > self.timeout:
            problems.append(f"heartbeat: {self.heartbeat} exceeds timeout {self.timeout}")
        problems += params_problems(self.kind, self.params)
        problems += own_problems(self.id, [d.job for d in self.depends_on])
        if problems:
            raise Problems(problems)
        return self

    def period(self) -> timedelta:
        """The shortest gap between two fire times by the wall clock (`Timing.period`)."""
        return self.timing.period()

    @property
    def timing(self) -> Timing:
        """When the job fires: the one value every fire time is computed from.

        Not a cached property: `model_copy(update=...)` would carry the old one over.
        """
        return _timing(
            self.cron,
            self.interval,
            self.timezone,
            self.start_at,
            self.end_at,
            self.jitter,
            self.calendar_rule,
        )

    @property
    def calendar_rule(self) -> CalendarRule | None:
        """The job's business calendar and holiday rule (None: it runs every day)."""
        found, on_holiday = self.calendar_definition, self.on_holiday or "skip"
        if found is None:
            return None
        early = self.on_early_close or "keep"
        return CalendarRule(calendar=found, on_holiday=on_holiday, on_early_close=early)

    @property
    def activity(self) -> str:
        """The work activity of a kind that does its slot in one activity ('' otherwise)."""
        return kinds()[self.kind].activity or ""

    @property
    def workflow(self) -> str | None:
        """The workflow type of a workflow kind (a workflow of steps), else None."""
        return kinds()[self.kind].workflow_name

    @property
    def one_transaction(self) -> bool:
        """Whether the kind works a slot in one transaction (`JobKind.slot_work`): its runs
        plan, claim, work and complete in that transaction (`JobRun.one_transaction`)."""
        return kinds()[self.kind].slot_work is not None

    @property
    def chunked(self) -> bool:
        """Whether the kind works in fenced chunks (`JobKind.chunked`): a run does its first
        chunk in the transaction that begins it (`JobRun.chunked`)."""
        return kinds()[self.kind].chunked

    @property
    def lifetime(self) -> timedelta:
        """How long a run of this job may live, its workflow execution timeout:
        `max_run_time`, or what the fields let a run take at the longest
        (`activities.common.lifetime`): each slot its catch-up policy may run (a calendar job's
        fire time: as many as the plan considers), each with its longest wait for upstream
        slots and its work, every attempt of every series at `timeout`, every step of a
        workflow kind (its compensations too) likewise."""
        if self.max_run_time is not None:
            return self.max_run_time
        if self.calendar_definition is not None:
            slots = MAX_CONSIDERED
        else:
            slots = self.max_missed + 1 if self.catchup == "all" and self.max_missed else 1
        wait = wait_bound(
            [d.within for d in self.depends_on],
            any(d.on_failure == "wait" for d in self.depends_on),
        )
        calls = max(len(kinds()[self.kind].steps), 1)
        work = calls * work_bound(
            self.timeout, self.retry.maximum_attempts, self.retry.maximum_interval
        )
        return run_lifetime(slots, wait, work)

    @property
    def schedule_text(self) -> str:
        return self.cron if self.cron else f"every {self.interval}"


@lru_cache(maxsize=4096)
def _timing(
    cron: str | None,
    interval: timedelta | None,
    timezone: str,
    start_at: datetime | None,
    end_at: datetime | None,
    jitter: timedelta,
    calendar: CalendarRule | None,
) -> Timing:
    return Timing(
        cron=cron,
        interval=interval,
        timezone=timezone,
        start_at=start_at,
        end_at=end_at,
        jitter=jitter,
        calendar=calendar,
    )


def parse_each(
    data: dict[str, Any], now: datetime | None = None
) -> tuple[tuple[JobSpec, ...], dict[str, list[str]]]:
    """Validate every job table on its own, then the dependencies between them (`now`:
    from when `same` mappings are checked): the valid jobs, each invalid one's problems.

    `[calendars]` is the catalog's calendars, not a job: jobs may name them."""
    data = dict(data)
    calendars, problems = parse_calendars(data.pop(CALENDARS_TABLE, None))
    jobs: list[JobSpec] = []
    for job_id, table in data.items():
        if not isinstance(table, dict):
            problems[job_id] = [f"job {job_id!r}: must be a table of settings, got {short(table)}"]
            continue
        if "id" in table:
            problems[job_id] = [
                f"job {job_id!r}: id: is not a setting; the table's name [{job_id}] is the "
                f"job's id (got {short(table['id'])})"
            ]
            continue
        try:
            jobs.append(
                JobSpec.model_validate({**table, "id": job_id}, context={"calendars": calendars})
            )
        except ValidationError as exc:
            problems[job_id] = [line for err in exc.errors() for line in format_error(job_id, err)]
    for job_id, found in dependency_problems(jobs, set(data), now).items():
        problems.setdefault(job_id, []).extend(found)
    return tuple(j for j in jobs if j.id not in problems), problems


def parse_catalog(data: dict[str, Any]) -> tuple[JobSpec, ...]:
    """Validate every job table; raise one `CatalogError` listing all problems."""
    jobs, problems = parse_each(data)
    if problems:
        raise catalog_error([line for lines in problems.values() for line in lines])
    return jobs


def catalog_error(problems: list[str]) -> CatalogError:
    """One line for one problem, else a count and one line each; nothing was changed."""
    if len(problems) == 1:
        return CatalogError(f"{problems[0]}; nothing was changed")
    return CatalogError(
        f"the catalog has {len(problems)} problem(s); nothing was changed:\n  "
        + "\n  ".join(problems)
    )


def load_catalog(
    path: Path | None = None, *, engine: bool = True, shards: int = DEFAULT_SHARDS
) -> tuple[JobSpec, ...]:
    """Read and validate the catalog file (default: the packaged `schedules/jobs.toml`), with
    the engine's jobs (a dispatcher per shard) beside its own unless `engine` is False."""
    return parse_catalog(catalog_tables(path, engine=engine, shards=shards))


def load_valid_jobs(
    path: Path | None = None, *, engine: bool = True
) -> tuple[tuple[JobSpec, ...], dict[str, list[str]]]:
    """Read the catalog file (with the engine's jobs, as `load_catalog`); its valid jobs,
    and each invalid job's problems.

    For the commands that act on one job or read the record (`trigger`, `list`, `runs`,
    `explain` ...): a colleague's broken entry does not stop them for the others. `sync`
    and `validate` take the whole catalog (`load_catalog`). A file that cannot be read, or
    is not TOML, still raises `CatalogError`.
    """
    return parse_each(catalog_tables(path, engine=engine))


def catalog_tables(
    path: Path | None = None, *, engine: bool = True, shards: int = DEFAULT_SHARDS
) -> dict[str, Any]:
    """The tables the fleet runs, unvalidated: the catalog file's (`read_catalog`), and
    the engine's jobs (`with_engine_jobs`) unless `engine` is False."""
    data = read_catalog(path)
    return with_engine_jobs(data, shards) if engine else data


@cache
def default_catalog() -> dict[str, JobSpec]:
    """The packaged catalog by job id."""
    return {job.id: job for job in load_catalog()}
