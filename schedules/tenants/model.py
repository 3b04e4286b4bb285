"""A runtime schedule as the application gives it (`Definition`) and as it is stored
(`Schedule`), validated field by field with one-line messages that name the field and value.

The timing fields reuse the catalog's readings: the cron grammar and the zone database of
`timing/` (one parser, one tz database), at minute granularity; the catch-up vocabulary is
the catalog's (`skip`, `latest`, `all` with `max_missed`). Params are validated, and
normalised, by the kind's own model.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from activities.runtime_models import ledger_name
from core.errors import InvalidScheduleError
from schedules.catalog.model import Catchup
from schedules.tenants.kinds import runtime_kind
from timing import Timing, UnknownZoneError, zone
from timing.cron import CronError, parse_cron

# Dispatcher shards: a schedule's shard is id % SHARDS, fixed when it is stored. At most 16
# (the dispatchers are catalog jobs, one per shard; Temporal's side must not grow with N).
SHARDS = 4
MAX_TEXT = 200  # tenant, name, who
MAX_NOTE = 1000
MAX_PARAMS_BYTES = 64 * 1024  # params travel in every run's input
FIRST_YEAR, LAST_YEAR = 1970, 2100  # as the catalog's start_at / end_at
# The fields that say what runs when: equal ones make a create idempotent.
DEFINITION_FIELDS = (
    "kind",
    "cron",
    "timezone",
    "params",
    "catchup",
    "max_missed",
    "start_at",
    "end_at",
)
TIMING_FIELDS = ("cron", "timezone", "start_at", "end_at")


@contextmanager
def _refused(
    errors: type[Exception] | tuple[type[Exception], ...], reason: Callable[[Exception], str]
) -> Iterator[None]:
    """A field validator's check: what it raises of `errors` becomes the field's one-line
    `ValueError`, `reason(exc)` (pydantic names the field)."""
    try:
        yield
    except errors as exc:
        raise ValueError(reason(exc)) from None


def _text(value: str, what: str, limit: int = MAX_TEXT) -> str:
    if not value or value != value.strip():
        raise ValueError(f"must be non-empty text without surrounding spaces, got {value!r}")
    if len(value) > limit:
        raise ValueError(f"must be at most {limit} characters, got {len(value)}")
    if any(not ch.isprintable() for ch in value):
        raise ValueError(f"must hold no control characters, got {value[:80]!r}")
    return value


class Definition(BaseModel):
    """One runtime schedule as the application states it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tenant: str
    name: str
    kind: str
    cron: str
    timezone: str
    params: dict[str, Any] = Field(default_factory=dict, validate_default=True)
    catchup: Catchup = "latest"
    max_missed: int | None = None
    start_at: datetime | None = None
    end_at: datetime | None = None
    # The state a create starts in; later changed by pause / resume only.
    paused: bool = False
    note: str = Field(default="", max_length=MAX_NOTE)

    @field_validator("tenant", "name")
    @classmethod
    def _names(cls, value: str) -> str:
        return _text(value, "name")

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str) -> str:
        with _refused(CronError, lambda exc: f"{exc.detail} (got {value[:80]!r})"):
            cron = parse_cron(value)  # the one grammar: names the cron's field and value
        if cron.seconds != frozenset({0}):
            raise ValueError(
                f"runtime schedules fire on whole minutes: give 5 fields (or 6 with a year), "
                f"got {value[:80]!r}"
            )
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        unknown = (UnknownZoneError, ValueError, OSError)
        with _refused(unknown, lambda _: f"is not a known IANA time zone: {value[:80]!r}"):
            zone(value)
        return value

    @field_validator("kind")
    @classmethod
    def _kind(cls, value: str) -> str:
        with _refused(InvalidScheduleError, lambda exc: str(exc).removeprefix("kind: ")):
            runtime_kind(value)
        return value

    @field_validator("params")
    @classmethod
    def _params(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        kind = info.data.get("kind")
        if kind is None:
            return value  # the kind's own problem is reported
        try:
            params = runtime_kind(kind).params_model.model_validate(value)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise ValueError(f"{where}: {err['msg']} (got {_short(err.get('input'))})") from None
        normal = params.model_dump(mode="json")  # defaults filled in: comparable
        size = len(json.dumps(normal))
        if size > MAX_PARAMS_BYTES:
            raise ValueError(f"{size} bytes of JSON, more than {MAX_PARAMS_BYTES}")
        return normal

    @field_validator("start_at", "end_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError(f"needs a UTC offset, e.g. 2027-01-01T00:00:00Z, got {value}")
        if value is not None and not FIRST_YEAR <= value.year <= LAST_YEAR:
            raise ValueError(f"must lie in the years {FIRST_YEAR} to {LAST_YEAR}, got {value}")
        return value.astimezone(UTC) if value is not None else None

    @field_validator("max_missed")
    @classmethod
    def _considered(cls, value: int | None) -> int | None:
        if value is not None and not 1 <= value <= 1000:
            raise ValueError(f"must be from 1 to 1000, got {value}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Definition:
        if self.catchup == "all" and self.max_missed is None:
            raise ValueError("max_missed: catchup 'all' needs max_missed >= 1, got None")
        if self.catchup != "all" and self.max_missed is not None:
            raise ValueError(f"max_missed: only applies to catchup 'all', not {self.catchup!r}")
        if self.start_at and self.end_at and self.start_at >= self.end_at:
            raise ValueError(f"start_at: {self.start_at} is not before end_at {self.end_at}")
        return self

    @property
    def timing(self) -> Timing:
        """When it fires: the one value of `timing/` every fire time comes from."""
        return _timing(self.cron, self.timezone, self.start_at, self.end_at)

    def same_definition(self, other: Definition) -> bool:
        """Whether `other` runs the same work at the same times (pause state aside)."""
        return all(getattr(self, f) == getattr(other, f) for f in DEFINITION_FIELDS)


class Schedule(Definition):
    """A stored runtime schedule (a `runtime_schedules` row)."""

    id: int
    version: int
    paused_by: str | None = None
    deleted_at: datetime | None = None
    shard: int
    next_fire_at: datetime | None = None
    timing_since: datetime
    created_at: datetime
    updated_at: datetime
    created_by: str = ""
    updated_by: str = ""

    @classmethod
    def of_row(cls, row: Mapping[str, Any]) -> Schedule:
        """The schedule of a `runtime_schedules` row (a dict row). Stored rows were
        validated when written; a kind no longer registered still reads."""
        data = {k: v for k, v in row.items() if k in cls.model_fields}
        data["note"] = row.get("paused_note") or ""
        return cls.model_construct(**data)

    @property
    def ledger_name(self) -> str:
        return ledger_name(self.id)

    def definition(self) -> dict[str, Any]:
        """The fields `import` reads and `export` writes, JSON-ready."""
        data = self.model_dump(mode="json", include=set(Definition.model_fields))
        if not data["note"]:
            del data["note"]
        for key in ("max_missed", "start_at", "end_at"):
            if data[key] is None:
                del data[key]
        return data


def definition(data: Mapping[str, Any]) -> Definition:
    """Validate `data` as a `Definition`, or raise one `InvalidScheduleError` line naming
    the schedule, the field and the value."""
    try:
        return Definition.model_validate(data)
    except ValidationError as exc:
        raise InvalidScheduleError(validation_line(data, exc)) from None


def validation_line(data: Mapping[str, Any], exc: ValidationError) -> str:
    """`schedule 'acme'/'weekly': cron: minute '61' is not ... (got '61 * * * *')`."""
    who = f"schedule {_short(data.get('tenant'))}/{_short(data.get('name'))}"
    problems = [_problem(err) for err in exc.errors()]
    return f"{who}: {'; '.join(problems)}"


def _problem(err: Mapping[str, Any]) -> str:
    field = ".".join(str(p) for p in err["loc"])
    message = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "missing":
        return f"{field}: is required"
    if err["type"] == "extra_forbidden":
        return f"{field}: is not a field of a runtime schedule"
    if not field:  # model-level: the message starts with its own field
        return message
    shown = err.get("input")
    if isinstance(shown, (dict, list)) or "(got " in message or ", got " in message:
        return f"{field}: {message}"
    return f"{field}: {message} (got {_short(shown)})"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@lru_cache(maxsize=4096)
def _timing(cron: str, timezone: str, start_at: datetime | None, end_at: datetime | None) -> Timing:
    return Timing(cron=cron, timezone=timezone, start_at=start_at, end_at=end_at)
