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
from functools import cache, lru_cache
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
from pydantic_core import PydanticSerializationError

from activities.runtime.models import ledger_name
from activities.runtime.shards import BUCKETS as BUCKETS  # a row's bucket (`shard`): id % 16
from core.errors import InvalidScheduleError
from core.text import unprintable
from schedules.catalog.calendars import (
    CALENDAR_FIELDS,
    CALENDARS_TABLE,
    calendar_problems,
    define_calendar,
    parse_calendars,
)
from schedules.catalog.dependencies import RuntimeDependency
from schedules.catalog.durations import format_duration
from schedules.catalog.model import Catchup, read_catalog
from schedules.catalog.problems import short
from schedules.tenants.kinds import runtime_kind
from schedules.tenants.values import json_problem, problem_text
from timing import Timing
from timing.business import BusinessCalendar, CalendarRule, OnHoliday
from timing.cron import CronError, parse_cron
from timing.zones import zone_problem

MAX_TEXT = 200  # tenant, name, who
MAX_NOTE = 1000
MAX_PARAMS_BYTES = 64 * 1024  # params travel in every run's input
FIRST_YEAR, LAST_YEAR = 1970, 2100  # as the catalog's start_at / end_at
MAX_DEPENDENCIES = 16
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
    *CALENDAR_FIELDS,
    "depends_on",
)
TIMING_FIELDS = ("cron", "timezone", "start_at", "end_at", *CALENDAR_FIELDS)


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
    return _shown_text(value, limit)


def _shown_text(value: str, limit: int) -> str:
    """Text an operator's terminal will print: at most `limit` characters, all printable
    (`core.text`)."""
    if len(value) > limit:
        raise ValueError(f"must be at most {limit} characters, got {len(value)}")
    if unprintable(value) is not None:
        raise ValueError(f"must hold no control characters, got {value[:80]!r}")
    return value


def checked_by(by: str) -> str:
    """Who makes a change (`--by`), as every write records it: printable, at most
    `MAX_TEXT` characters (empty: unknown); else one `InvalidScheduleError` line."""
    try:
        return _shown_text(by, MAX_TEXT)
    except ValueError as exc:
        raise InvalidScheduleError(f"by: {exc}") from None


def checked_note(note: str, *, why: str = "the schedule is paused") -> str:
    """A pause's (or a resume's) note: why, in 1 to `MAX_NOTE` printable characters; else
    one `InvalidScheduleError` line."""
    if not note.strip():
        raise InvalidScheduleError(
            f"note: say why {why}, in 1 to {MAX_NOTE} characters, got {note!r}"
        )
    try:
        return _shown_text(note, MAX_NOTE)
    except ValueError as exc:
        raise InvalidScheduleError(f"note: {exc}") from None


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
    # Business days (docs/calendars.md): a calendar's name (the holidays package's, or one
    # of the catalog's [calendars]) and what a fire time on another day does; the
    # definition is resolved from the name when the schedule is written, and kept.
    calendar: str | None = None
    on_holiday: OnHoliday | None = None
    calendar_definition: BusinessCalendar | None = None
    # The state a create starts in; later changed by pause / resume only.
    paused: bool = False
    note: str = ""
    # Upstream slots each slot waits for (docs/dependencies.md): catalog jobs, or the
    # tenant's own schedules by name.
    depends_on: list[RuntimeDependency] = Field(default_factory=list, max_length=MAX_DEPENDENCIES)

    @model_validator(mode="before")
    @classmethod
    def _define_calendar(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("calendar") and not data.get("on_holiday"):
            data = data | {"on_holiday": "skip"}
        return define_calendar(cls, data, _CatalogCalendars())

    @field_validator("tenant", "name")
    @classmethod
    def _names(cls, value: str) -> str:
        return _text(value, "name")

    @field_validator("note")
    @classmethod
    def _note(cls, value: str) -> str:
        return _shown_text(value, MAX_NOTE)

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
        problem = zone_problem(value)  # unknown (with the closest name), or legacy
        if problem is not None:
            raise ValueError(problem)
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
        _storable(value)  # before the kind's model reads it: a value nested 100,000 deep
        try:
            params = runtime_kind(kind).params_model.model_validate(value)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise ValueError(f"{where}: {err['msg']} (got {short(err.get('input'))})") from None
        try:
            normal = params.model_dump(mode="json")  # defaults filled in: comparable
        except PydanticSerializationError as exc:
            raise ValueError(f"cannot be written as JSON: {str(exc)[:120]}") from None
        _storable(normal)
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
            raise ValueError(f"must be from 1 to 1000, got {short(value)}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Definition:
        problems = calendar_problems(self)
        if problems:
            raise ValueError(problems[0])
        if self.catchup == "all" and self.max_missed is None:
            raise ValueError("max_missed: catchup 'all' needs max_missed >= 1, got None")
        if self.catchup != "all" and self.max_missed is not None:
            raise ValueError(f"max_missed: only applies to catchup 'all', not {self.catchup!r}")
        if self.start_at and self.end_at and self.start_at >= self.end_at:
            raise ValueError(f"start_at: {self.start_at} is not before end_at {self.end_at}")
        seen = set()
        for i, dep in enumerate(self.depends_on):
            if dep.schedule == self.name:
                raise ValueError(
                    f"depends_on[{i}].schedule: a schedule cannot depend on itself ({self.name!r})"
                )
            if (dep.job, dep.schedule) in seen:
                raise ValueError(f"depends_on[{i}]: {dep.upstream} is named twice")
            seen.add((dep.job, dep.schedule))
        return self

    @property
    def timing(self) -> Timing:
        """When it fires: the one value of `timing/` every fire time comes from."""
        rule = None
        if self.calendar_definition is not None:
            rule = CalendarRule(
                calendar=self.calendar_definition, on_holiday=self.on_holiday or "skip"
            )
        return _timing(self.cron, self.timezone, self.start_at, self.end_at, rule)

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
    deferred_at: datetime | None = None  # its due slot held back by a tenant limit (issue 40)
    deferred_reason: str | None = None
    timing_since: datetime
    created_at: datetime
    updated_at: datetime
    created_by: str = ""
    updated_by: str = ""

    @classmethod
    def of_row(cls, row: Mapping[str, Any]) -> Schedule:
        """The schedule of a `runtime_schedules` row (a dict row). Stored rows were
        validated when written; a kind no longer registered still reads."""
        fields = cls.model_fields  # once: pydantic builds it anew on each read
        data = {k: v for k, v in row.items() if k in fields}
        data["note"] = row.get("paused_note") or ""
        if data.get("calendar_definition") is not None:  # jsonb: built, as validated
            data["calendar_definition"] = BusinessCalendar.model_validate(
                data["calendar_definition"]
            )
        data["depends_on"] = [
            RuntimeDependency.model_validate(d) for d in row.get("depends_on") or ()
        ]
        return cls.model_construct(**data)

    @property
    def ledger_name(self) -> str:
        return ledger_name(self.id)

    def definition(self) -> dict[str, Any]:
        """The fields `import` reads and `export` writes, JSON-ready."""
        data = self.model_dump(mode="json", include=set(Definition.model_fields))
        if not data["note"]:
            del data["note"]
        del data["calendar_definition"]  # `import` resolves the name again
        for key in ("max_missed", "start_at", "end_at", "calendar", "on_holiday"):
            if data[key] is None:
                del data[key]
        if not data["depends_on"]:
            del data["depends_on"]
        else:
            data["depends_on"] = [_exported(d) for d in self.depends_on]
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
    who = f"schedule {short(data.get('tenant'))}/{short(data.get('name'))}"
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
    return f"{field}: {message} (got {short(shown)})"


def _storable(params: Any) -> None:
    """Refuse params that PostgreSQL's jsonb or a JSON reader would not take
    (`schedules.tenants.values`), naming the part."""
    if (problem := json_problem(params)) is not None:
        raise ValueError(problem_text(*problem))


@lru_cache(maxsize=4096)
def _timing(
    cron: str,
    timezone: str,
    start_at: datetime | None,
    end_at: datetime | None,
    calendar: CalendarRule | None = None,
) -> Timing:
    return Timing(cron=cron, timezone=timezone, start_at=start_at, end_at=end_at, calendar=calendar)


@cache
def catalog_calendars() -> dict[str, BusinessCalendar]:
    """The packaged catalog's own calendars (`schedules/jobs.toml`) by name: what a
    runtime schedule's `calendar` may name besides the holidays package's."""
    found, _ = parse_calendars(read_catalog().get(CALENDARS_TABLE))
    return found


class _CatalogCalendars:
    """The validation info `define_calendar` reads: the packaged catalog's calendars."""

    @property
    def context(self) -> dict[str, Any]:
        return {"calendars": catalog_calendars()}


def _exported(dep: RuntimeDependency) -> dict[str, Any]:
    """A dependency as `import` reads it and people write it (`within` as "2h")."""
    data = dep.model_dump(mode="json", exclude_none=True)
    return data | {"within": format_duration(dep.within)}


def stored_dependencies(definition: Definition) -> list[dict[str, Any]]:
    """The `depends_on` column's JSON (the engine reads it as `Dependency` values)."""
    return [
        d.dependency().model_dump(mode="json", exclude_none=True) for d in definition.depends_on
    ]
