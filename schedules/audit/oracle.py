"""The audit's own answer to "when should this job have fired", written apart from `timing/`.

A bug in the engine's fire times must not hide itself, so nothing here is shared with
`timing/` (a unit test keeps it so), and it is written another way: the cron is read again
from its text, each field by trying every value it could take against each of its elements
(the engine expands the elements), with the aliases as the seven fields they stand for; fire
times are found by brute force, minute by minute of real time, each minute converted to the
job's wall clock through `zoneinfo` (the zone files of the `tzdata` package, as the engine
is documented to use), applying the rules of docs/time-zones.md:

- a job at a fixed hour (no `*` and no step in its hour field) keeps its wall-clock time: a
  time that does not exist that day (spring forward) runs once at the first valid instant
  after the gap, several times of one gap together; a time that happens twice (fall back)
  runs once, the first time;
- a job with a wildcard or stepped hour follows real time: every real minute whose wall
  clock matches fires, so times in a gap do not happen and repeated ones happen twice;
- an interval job fires at every multiple of its interval since the Unix epoch, in UTC.

Slow but obvious: about a second per job-year of minutes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from importlib import resources
from math import inf
from zoneinfo import ZoneInfo

from schedules.audit.days import MAX_SHIFT, Days

_MINUTE = timedelta(minutes=1)
# The audit's own (it shares no code with `timing`): `end + TICK` takes in `end` itself.
TICK = timedelta(microseconds=1)
# The aliases of docs/catalog.md, each as the seven fields it stands for.
_ALIASES = {
    "0 0 0 1 1 * *": ("@yearly", "@annually"),
    "0 0 0 1 * * *": ("@monthly",),
    "0 0 0 * * 0 *": ("@weekly",),
    "0 0 0 * * * *": ("@daily", "@midnight"),
    "0 0 * * * * *": ("@hourly",),
}
_MONTHS = {
    name: n for n, name in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split(), 1)
}
_WEEKDAYS = {name: n for n, name in enumerate("sun mon tue wed thu fri sat".split())}


class OracleError(ValueError):
    """A cron or zone the audit cannot read."""


@cache
def zone(name: str) -> ZoneInfo:
    """The zone from the `tzdata` package's files (never the machine's)."""
    if name == "UTC":
        return ZoneInfo("UTC")
    path = resources.files("tzdata").joinpath("zoneinfo", *name.split("/"))
    try:
        with path.open("rb") as f:
            return ZoneInfo.from_file(f, key=name)
    except (OSError, ValueError) as exc:
        raise OracleError(f"unknown time zone {name!r}") from exc


@dataclass(frozen=True)
class _Element:
    """One element of a cron field: the values from `first` to `last`, every `step`."""

    first: int
    last: float
    step: int

    def admits(self, value: int) -> bool:
        return self.first <= value <= self.last and (value - self.first) % self.step == 0


def _number(text: str, what: str, names: dict[str, int]) -> int:
    if text.lower() in names:
        return names[text.lower()]
    if not text.isdigit():
        raise OracleError(f"{what}: {text!r} is not a number")
    return int(text)


def _elements(text: str, what: str, least: int, names: dict[str, int]) -> list[_Element]:
    """The elements of the field `text` (`*`, `N`, `N-M`, each maybe `/STEP`); `least` is
    where `*` starts. Without an end (`*`, `N/STEP`) an element runs on past every value."""
    found = []
    for element in text.split(","):
        base, slash, step = element.partition("/")
        if slash and not (step.isdigit() and int(step) >= 1):
            raise OracleError(f"{what}: {element!r} needs a step of 1 or more")
        first_text, dash, last_text = base.partition("-")
        first = least if base == "*" else _number(first_text, what, names)
        if dash:
            last: float = _number(last_text, what, names)
        else:
            last = inf if base == "*" or slash else first
        found.append(_Element(first, last, int(step) if slash else 1))
    return found


def _allowed(
    text: str, what: str, values: range, names: dict[str, int] | None = None
) -> frozenset[int]:
    """Which of `values` the field `text` allows: each value is tried against each element
    of the field (nothing is enumerated from the field itself)."""
    elements = _elements(text, what, values.start, names or {})
    return frozenset(v for v in values if any(e.admits(v) for e in elements))


def _weekdays(text: str) -> frozenset[int]:
    """The days of the week (0 = Sunday) the field `text` allows; 7 is Sunday too."""
    elements = _elements(text, "day of week", 0, _WEEKDAYS)
    return frozenset(
        day
        for day in range(7)
        if any(e.admits(day) or (day == 0 and e.admits(7)) for e in elements)
    )


@dataclass(frozen=True)
class Cron:
    """A cron read by the audit: the sets each field allows."""

    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    years: frozenset[int] | None
    fixed_hour: bool  # the hour field names its hours: wall-clock rules apply
    either_day: bool  # both day fields restricted: a day matches if either does

    def matches(self, wall: datetime) -> bool:
        """Whether the wall-clock minute `wall` (naive) is one of the cron's."""
        if wall.minute not in self.minutes or wall.hour not in self.hours:
            return False
        if wall.month not in self.months:
            return False
        if self.years is not None and wall.year not in self.years:
            return False
        day = wall.day in self.days
        weekday = (wall.isoweekday() % 7) in self.weekdays
        return (day or weekday) if self.either_day else (day and weekday)


def parse(text: str) -> Cron:
    """Read a cron of the catalog's grammar (docs/catalog.md, Cron grammar)."""
    aliased = [seven for seven, names in _ALIASES.items() if text.strip().lower() in names]
    fields = (aliased[0] if aliased else text).split()
    fields = {5: ["0", *fields, "*"], 6: ["0", *fields], 7: fields}.get(len(fields), [])
    if not fields:
        raise OracleError(f"cron {text!r}: expected 5 to 7 fields")
    second, minute, hour, dom, month, dow, year = fields
    try:
        return Cron(
            seconds=_allowed(second, "second", range(60)),
            minutes=_allowed(minute, "minute", range(60)),
            hours=_allowed(hour, "hour", range(24)),
            days=_allowed(dom, "day of month", range(1, 32)),
            months=_allowed(month, "month", range(1, 13), _MONTHS),
            weekdays=_weekdays(dow),
            years=None if year == "*" else _allowed(year, "year", range(2000, 2101)),
            fixed_hour="*" not in hour and "/" not in hour,
            either_day=dom != "*" and dow != "*",
        )
    except ValueError as exc:
        raise OracleError(f"cron {text!r}: {exc}") from None


def _wall(instant: datetime, tz: ZoneInfo) -> tuple[datetime, int]:
    local = instant.astimezone(tz)
    return local.replace(tzinfo=None, fold=0), local.fold


def cron_fire_times(cron: Cron, tz: ZoneInfo, start: datetime, end: datetime) -> Iterator[datetime]:
    """Every fire time in [start, end), UTC, in order: each real minute, brute force."""
    t = start.astimezone(UTC).replace(second=0, microsecond=0)
    prev_wall, _ = _wall(t - _MINUTE, tz)
    while t < end:
        wall, fold = _wall(t, tz)
        if cron.fixed_hour:
            fires = cron.matches(wall) and fold == 0  # a repeated time: the first only
            skipped = prev_wall + _MINUTE
            while not fires and skipped < wall:  # wall times a gap just jumped over
                fires = cron.matches(skipped)
                skipped += _MINUTE
            in_gap = wall - prev_wall > _MINUTE and not cron.matches(wall)
        else:
            fires, in_gap = cron.matches(wall), False
        if fires:
            # A time moved out of a gap fires at the gap's end, at second 0.
            for second in [0] if in_gap else sorted(cron.seconds):
                instant = t + timedelta(seconds=second)
                if start <= instant < end:
                    yield instant
        prev_wall = wall
        t += _MINUTE


def interval_fire_times(every: timedelta, start: datetime, end: datetime) -> Iterator[datetime]:
    """Every multiple of `every` since the Unix epoch in [start, end), UTC."""
    step = every.total_seconds()
    k = -(-start.timestamp() // step)  # ceil
    while (t := datetime.fromtimestamp(k * step, UTC)) < end:
        yield t
        k += 1


@dataclass(frozen=True)
class Timing:
    """What the audit knows of when a job fires: read from the catalog entry's fields."""

    cron: str | None
    interval: timedelta | None
    timezone: str
    start_at: datetime | None = None
    end_at: datetime | None = None
    days: Days | None = None  # a business calendar (`schedules.audit.days`)

    def fire_times(self, start: datetime, end: datetime) -> list[datetime]:
        """The fire times in [start, end), within the job's own start_at and end_at: for a
        job with a business calendar, its *slots* (unadjusted) that run at all."""
        if self.start_at is not None:
            start = max(start, self.start_at)
        if self.end_at is not None:
            end = min(end, self.end_at + TICK)
        if start >= end:
            return []
        if self.interval is not None:
            return list(interval_fire_times(self.interval, start, end))
        if self.cron is None:
            raise OracleError("a job needs a cron or an interval")
        found = cron_fire_times(parse(self.cron), zone(self.timezone), start, end)
        if self.days is None:
            return list(found)
        return [s for s in found if self.days.due(s, zone(self.timezone)) is not None]

    def due_times(self, start: datetime, end: datetime) -> dict[datetime, datetime]:
        """Each slot (unadjusted fire time) whose run is due in [start, end), with when:
        the slot itself without a calendar, else the time its calendar moves it to."""
        if self.days is None:
            return {t: t for t in self.fire_times(start, end)}
        tz = zone(self.timezone)
        reach = timedelta(days=MAX_SHIFT + 1)
        found = {}
        for slot in self.fire_times(start - reach, end + reach):
            due = self.days.due(slot, tz)
            if due is not None and start <= due < end:
                found[slot] = due
        return found
