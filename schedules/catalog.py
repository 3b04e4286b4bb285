"""The job catalog: jobs declared in `schedules/jobs.toml`, validated as `JobSpec` models.

Validation covers the whole catalog before anything reaches Temporal and reports every
problem at once, each naming the job, the field and the value.
"""

from __future__ import annotations

import re
import tomllib
from datetime import datetime, timedelta
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from core.errors import CatalogError
from jobs import KINDS
from schedules.durations import Duration
from timing import Timing, UnknownZoneError, zone
from timing.cron import CronError, parse_cron
from workflows import RetrySettings

_KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")

Overlap = Literal[
    "skip", "buffer_one", "buffer_all", "cancel_other", "terminate_other", "allow_all"
]
Catchup = Literal["skip", "latest", "all"]


class RetrySpec(BaseModel):
    """Retry policy of the job's work activity."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    maximum_attempts: int = Field(default=10, ge=0, description="0: unlimited")
    initial_interval: Duration = timedelta(seconds=5)
    backoff_coefficient: float = Field(default=2.0, ge=1)
    maximum_interval: Duration = timedelta(minutes=5)

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
    cron: str | None = None
    interval: Duration | None = None
    timezone: str
    start_at: datetime | None = None
    end_at: datetime | None = None
    jitter: Duration = timedelta(0)
    overlap: Overlap = "skip"
    catchup: Catchup = "latest"
    max_missed: int | None = None
    catchup_window: Duration = timedelta(days=1)
    starting_deadline: Duration | None = None
    timeout: Duration = timedelta(hours=1)
    heartbeat: Duration | None = timedelta(minutes=1)
    retry: RetrySpec = Field(default_factory=RetrySpec)
    paused: bool = False
    note: str = ""
    alert_grace: Duration = timedelta(minutes=15)

    @field_validator("id")
    @classmethod
    def _kebab(cls, value: str) -> str:
        if not _KEBAB.match(value):
            raise ValueError(f"must be kebab-case like 'invoice-reminders', got {value!r}")
        return value

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        # The one grammar (timing/cron.py): the message names the cron's field and value.
        if value is not None:
            try:
                parse_cron(value)
            except CronError as exc:
                raise ValueError(exc.detail) from None
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            zone(value)
        except UnknownZoneError:
            raise ValueError(f"is not a known IANA time zone: {value!r}") from None
        return value

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        if value not in KINDS:
            raise ValueError(f"unknown job kind {value!r}; known kinds: {', '.join(sorted(KINDS))}")
        return value

    @field_validator("start_at", "end_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError(f"needs a UTC offset, e.g. 2027-01-01T00:00:00Z, got {value}")
        return value

    @field_validator("catchup_window")
    @classmethod
    def _window(cls, value: timedelta) -> timedelta:
        if value < timedelta(seconds=10):
            raise ValueError(f"must be at least 10s (Temporal's minimum), got {value}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> JobSpec:
        problems = []
        if (self.cron is None) == (self.interval is None):
            problems.append("cron / interval: give exactly one of them")
        if self.interval is not None and self.interval < timedelta(seconds=1):
            problems.append(f"interval: must be at least 1s, got {self.interval}")
        if self.catchup == "all" and (self.max_missed is None or self.max_missed < 1):
            problems.append(
                f"max_missed: catchup 'all' needs max_missed >= 1, got {self.max_missed}"
            )
        if self.catchup != "all" and self.max_missed is not None:
            problems.append(f"max_missed: only applies to catchup 'all', not {self.catchup!r}")
        if self.start_at and self.end_at and self.start_at >= self.end_at:
            problems.append(f"start_at: {self.start_at} is not before end_at {self.end_at}")
        if self.heartbeat is not None and self.heartbeat > self.timeout:
            problems.append(f"heartbeat: {self.heartbeat} exceeds timeout {self.timeout}")
        period = self.period()
        if period is not None and self.jitter >= period:
            problems.append(f"jitter: {self.jitter} is not shorter than the period {period}")
        try:
            KINDS[self.kind].params.model_validate(self.params)
        except ValidationError as exc:
            for err in exc.errors():
                where = ".".join(str(p) for p in err["loc"])
                problems.append(f"params.{where}: {err['msg']} (got {err.get('input')!r})")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def period(self) -> timedelta | None:
        """The shortest gap between two fire times (None if it cannot be told)."""
        if self.interval is not None:
            return self.interval
        if self.cron is None:
            return None
        return parse_cron(self.cron).shortest_gap()

    @property
    def timing(self) -> Timing:
        """When the job fires: the one value every fire time is computed from.

        Not a cached property: `model_copy(update=...)` would carry the old one over.
        """
        return _timing(
            self.cron, self.interval, self.timezone, self.start_at, self.end_at, self.jitter
        )

    @property
    def activity(self) -> str:
        return KINDS[self.kind].activity

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
) -> Timing:
    return Timing(
        cron=cron,
        interval=interval,
        timezone=timezone,
        start_at=start_at,
        end_at=end_at,
        jitter=jitter,
    )


def _format_error(job_id: str, err: dict) -> list[str]:
    field = ".".join(str(p) for p in err["loc"]) or None
    message = err["msg"].removeprefix("Value error, ")
    if field is None:  # model-level: already "field: message; field: message"
        return [f"job {job_id!r}: {part}" for part in message.split("; ")]
    shown = err.get("input")
    value = "" if isinstance(shown, dict) or repr(shown) in message else f" (got {shown!r})"
    if err["type"] == "missing":
        return [f"job {job_id!r}: {field}: is required"]
    return [f"job {job_id!r}: {field}: {message}{value}"]


def parse_catalog(data: dict[str, Any]) -> tuple[JobSpec, ...]:
    """Validate every job table; raise one `CatalogError` listing all problems."""
    jobs, problems = [], []
    for job_id, table in data.items():
        if not isinstance(table, dict):
            problems.append(f"job {job_id!r}: must be a table of settings, got {table!r}")
            continue
        try:
            jobs.append(JobSpec.model_validate({**table, "id": job_id}))
        except ValidationError as exc:
            for err in exc.errors():
                problems.extend(_format_error(job_id, err))
    if problems:
        raise CatalogError(
            f"the catalog has {len(problems)} problem(s); nothing was changed:\n  "
            + "\n  ".join(problems)
        )
    return tuple(jobs)


def load_catalog(path: Path | None = None) -> tuple[JobSpec, ...]:
    """Read and validate the catalog file (default: the packaged `schedules/jobs.toml`)."""
    try:
        if path is None:
            text = resources.files("schedules").joinpath("jobs.toml").read_text()
            where = "schedules/jobs.toml"
        else:
            text, where = path.read_text(), str(path)
        data = tomllib.loads(text)
    except OSError as exc:
        raise CatalogError(f"cannot read the catalog {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        # Duplicate job ids land here too: TOML refuses a table defined twice.
        raise CatalogError(f"{where} is not valid TOML: {exc}") from None
    return parse_catalog(data)


@cache
def default_catalog() -> dict[str, JobSpec]:
    """The packaged catalog by job id."""
    return {job.id: job for job in load_catalog()}
