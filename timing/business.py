"""Business calendars: which local dates a job works on, and where a holiday's run goes.

A `BusinessCalendar` is versioned data: a country or market calendar of the `holidays`
package (`base`: `"NYSE"`, `"US"`, `"GB-ENG"`, as that package codes them; None for weekends
only), plus explicit extra holidays and extra working days. Its version is the package's
release and a digest of the extras, so a new release or an edited list is a new version.

A local date is a **business day** when it is an extra working day, or else when it is not
an extra holiday, not a holiday of the base, and not a weekend day of the base (Saturday and
Sunday for every calendar the project names; a base's official working weekends count as
business days, as the package says).

A `CalendarRule` is a calendar and what a job does with a fire time whose local date is not
a business day (`on_holiday`):

- `skip`: it does not run;
- `following`: it runs on the next business day;
- `preceding`: it runs on the previous business day;
- `modified_following`: the next business day, unless that is in another month, then the
  previous one (the money-market convention: a month-end run stays in its month).

A moved fire time keeps its local wall-clock time on the day it moves to; if that time does
not exist there (spring forward) it runs at the first valid instant after the gap, if it
happens twice (fall back) at the first (the fixed-hour rule of `timing.firetimes`). A date
that has no business day to move to within `MAX_SHIFT` days is skipped. Several fire times
moved onto one instant (a daily job's Saturday, Sunday and Monday runs all at Monday 09:00
under `following`) run together, in one run, each under its own ledger row.

A market's **early close** (NYSE's 13:00 close on Christmas Eve and the day after
Thanksgiving, as the package's `half_day` category dates them, at the hour `EARLY_CLOSES`
gives) is a business day with a short session. What a fire time later than the close on such
a day does is the rule's `on_early_close`:

- `keep` (the default): nothing; it runs at its own time;
- `close`: it runs at the close (several such fire times run together, in one run);
- `skip`: it does not run.

The fire time before adjustment is the run's **slot**: its identity and its ledger key
(`job_executions.scheduled_at`). Editing a calendar moves where a slot runs, never which
slot it is, so a period already run is never run again.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from functools import cached_property, lru_cache
from typing import Any, Literal

import holidays
from pydantic import BaseModel, ConfigDict, field_validator, model_serializer, model_validator

from timing.cron import LAST_YEAR, Cron
from timing.firetimes import day_fires, instants
from timing.zones import zone

OnHoliday = Literal["skip", "following", "preceding", "modified_following"]
ON_HOLIDAY: tuple[str, ...] = ("skip", "following", "preceding", "modified_following")
OnEarlyClose = Literal["keep", "close", "skip"]
ON_EARLY_CLOSE: tuple[str, ...] = ("keep", "close", "skip")
EARLY_CLOSES: dict[str, tuple[str, time]] = {
    "NYSE": ("America/New_York", time(13)),
    "XNYS": ("America/New_York", time(13)),
    "XNAS": ("America/New_York", time(13)),
    "LSE": ("Europe/London", time(12, 30)),
    "XLON": ("Europe/London", time(12, 30)),
}
"""The markets whose early closes a job can follow: (the market's zone, its early close).
The `holidays` package dates the short sessions (its `half_day` category) and names the
hour only in words ("markets close at 1:00pm"), so the hour is this table's, checked
against those words by `tests/unit/test_early_close.py`."""
MAX_SHIFT = 31
"""A fire time moves at most this many days; a date with no business day that near is skipped."""
HOLIDAYS_VERSION: str = holidays.__version__
_ONE_DAY = timedelta(days=1)
_FIRST_DAY, _LAST_DAY = date(1970, 1, 1), date(LAST_YEAR, 12, 31)
_WEEKDAYS = "Mon Tue Wed Thu Fri Sat Sun".split()


# The package's codes, read once at import: a workflow decodes calendars in Temporal's
# sandbox, where the package's own lazy imports must not run.
_MARKETS = frozenset(holidays.list_supported_financial())
_COUNTRIES = {
    code: frozenset(subdivs) for code, subdivs in holidays.list_supported_countries().items()
}


def known_base(code: str) -> bool:
    """Whether the `holidays` package has this market (`NYSE`) or country (`US`, `GB-ENG`)."""
    if code in _MARKETS:
        return True
    country, dash, subdiv = code.partition("-")
    return country in _COUNTRIES and (not dash or subdiv in _COUNTRIES[country])


@lru_cache(maxsize=64)
def _source(code: str) -> holidays.HolidayBase:
    """The package's calendar for `code` (`known_base`): a financial market, else
    `COUNTRY[-SUBDIVISION]`. Years are filled in on first look-up (`expand`)."""
    if code in _MARKETS:
        return holidays.financial_holidays(code)
    country, _, subdiv = code.partition("-")
    return holidays.country_holidays(country, subdiv=subdiv or None)


@lru_cache(maxsize=16)
def _short_sessions(code: str) -> holidays.HolidayBase:
    """The market's early-close days (the package's `half_day` category)."""
    return holidays.financial_holidays(code, categories=("half_day",))


def _day_text(day: date) -> str:
    return f"{_WEEKDAYS[day.weekday()]} {day.isoformat()}"


class BusinessCalendar(BaseModel):
    """A named business calendar (see the module's docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    base: str | None = None
    extra_holidays: tuple[date, ...] = ()
    extra_working_days: tuple[date, ...] = ()

    @field_validator("base")
    @classmethod
    def _known(cls, value: str | None) -> str | None:
        if value is not None and not known_base(value):
            raise ValueError(
                f"is not a calendar of the holidays package {HOLIDAYS_VERSION}: {value[:40]!r} "
                "(a market like 'NYSE', a country like 'US', or 'GB-ENG' with a subdivision)"
            )
        return value

    @field_validator("extra_holidays", "extra_working_days")
    @classmethod
    def _dates(cls, value: tuple[date, ...]) -> tuple[date, ...]:
        for day in value:
            if not _FIRST_DAY <= day <= _LAST_DAY:
                raise ValueError(f"{day} is outside the years 1970 to {LAST_YEAR}")
        if len(set(value)) != len(value):
            twice = sorted(d for d in set(value) if value.count(d) > 1)
            raise ValueError(f"{twice[0]} is listed twice")
        return tuple(sorted(value))

    @model_validator(mode="after")
    def _disjoint(self) -> BusinessCalendar:
        both = sorted(set(self.extra_holidays) & set(self.extra_working_days))
        if both:
            raise ValueError(
                f"extra_holidays: {both[0]} is also an extra working day; a date is one or the other"
            )
        return self

    @property
    def version(self) -> str:
        """`holidays 0.109` and, with extras, a digest of them: `holidays 0.109 +3f2a9c`."""
        source = f"holidays {HOLIDAYS_VERSION}" if self.base else "weekends"
        if not (self.extra_holidays or self.extra_working_days):
            return source
        text = ",".join(d.isoformat() for d in self.extra_holidays) + "|"
        text += ",".join(d.isoformat() for d in self.extra_working_days)
        return f"{source} +{hashlib.sha256(text.encode()).hexdigest()[:6]}"

    @cached_property
    def _extra_off(self) -> frozenset[date]:
        return frozenset(self.extra_holidays)

    @cached_property
    def _extra_on(self) -> frozenset[date]:
        return frozenset(self.extra_working_days)

    def is_business(self, day: date) -> bool:
        """Whether `day` is a business day of this calendar."""
        if day in self._extra_on:
            return True
        if day in self._extra_off:
            return False
        if self.base is None:
            return day.weekday() < 5
        return _source(self.base).is_working_day(day)

    def early_close(self, day: date) -> str | None:
        """The name of business day `day`'s early close (`Christmas Eve (markets close at
        1:00pm)`), or None: a full session, a non-business day, or a base without early
        closes."""
        if self.base not in EARLY_CLOSES or not self.is_business(day):
            return None
        return _short_sessions(self.base).get(day)

    def why_not(self, day: date) -> str:
        """Why `day` is not a business day: `NYSE holiday (Christmas Day)`, `weekend`."""
        if day in self._extra_off:
            return f"{self.name} holiday (an extra holiday of the calendar)"
        if self.base is not None:
            name = _source(self.base).get(day)
            if name:
                return f"{self.name} holiday ({name})"
        return "weekend"


class CalendarRule(BaseModel):
    """A calendar and what a job does on its non-business days."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    calendar: BusinessCalendar
    on_holiday: OnHoliday
    on_early_close: OnEarlyClose = "keep"

    @model_serializer(mode="wrap")
    def _without_keep(self, handler: Any) -> Any:
        """Leave `on_early_close` out when it is `keep`, so a worker of the release before
        it (whose rule forbids unknown fields) still reads every other job's input."""
        data = handler(self)
        if self.on_early_close == "keep" and isinstance(data, dict):
            data.pop("on_early_close", None)
        return data

    @model_validator(mode="after")
    def _early_close_known(self) -> CalendarRule:
        if self.on_early_close != "keep" and self.calendar.base not in EARLY_CLOSES:
            raise ValueError(
                f"on_early_close: calendar {self.calendar.name!r} has no early closes this "
                f"project knows the hour of (got {self.on_early_close!r}; markets with them: "
                f"{', '.join(EARLY_CLOSES)})"
            )
        return self

    @property
    def label(self) -> str:
        """`NYSE business days, following` (and `, early close: close` when it acts)."""
        label = f"{self.calendar.name} business days, {self.on_holiday}"
        if self.on_early_close != "keep":
            label += f", early close: {self.on_early_close}"
        return label

    @property
    def market_zone(self) -> str | None:
        """The zone of the market's sessions (None: no early closes to follow)."""
        found = EARLY_CLOSES.get(self.calendar.base or "")
        return found[0] if found else None

    def short_session(self, day: date) -> tuple[time, str] | None:
        """(the close, its name) when business day `day` closes early and the rule acts
        on it; None otherwise."""
        if self.on_early_close == "keep":
            return None
        name = self.calendar.early_close(day)
        if name is None:
            return None
        return EARLY_CLOSES[self.calendar.base or ""][1], name

    def target(self, day: date) -> date | None:
        """The business day a fire time of local date `day` runs on (None: skipped)."""
        return _target(self, day)

    def is_business(self, day: date) -> bool:
        return _business(self, day)

    def contributors(self, day: date) -> list[date]:
        """The local dates whose fire times run on business day `day`, oldest first: `day`
        itself and the non-business days around it that move onto it."""
        found = [day]
        for step in (-_ONE_DAY, _ONE_DAY):
            other = day + step
            for _ in range(MAX_SHIFT):
                if not _FIRST_DAY <= other <= _LAST_DAY or _business(self, other):
                    break
                if _target(self, other) == day:
                    found.append(other)
                other += step
        return sorted(found)


@lru_cache(maxsize=262144)
def _business(rule: CalendarRule, day: date) -> bool:
    return rule.calendar.is_business(day)


@lru_cache(maxsize=262144)
def _target(rule: CalendarRule, day: date) -> date | None:
    if _business(rule, day):
        return day
    if rule.on_holiday == "skip":
        return None
    after, before = _nearest(rule, day, _ONE_DAY), _nearest(rule, day, -_ONE_DAY)
    if rule.on_holiday == "following":
        return after
    if rule.on_holiday == "preceding":
        return before
    if after is not None and after.month == day.month:  # modified_following
        return after
    return before


def _nearest(rule: CalendarRule, day: date, step: timedelta) -> date | None:
    other = day
    for _ in range(MAX_SHIFT):
        other += step
        if not _FIRST_DAY <= other <= _LAST_DAY:
            return None
        if _business(rule, other):
            return other
    return None


# --- fire times under a calendar --------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Fire:
    """One slot of a job and when it runs: `at` (UTC) is when the server fires it, `slot`
    (UTC) its unadjusted fire time, the ledger key. `moved` says why they differ."""

    at: datetime
    slot: datetime
    moved: str = ""


@dataclass(frozen=True)
class Grid:
    """What a calendar job's fire times are computed from: the parsed cron, its zone, its
    bounds (inclusive, on slots) and the rule."""

    cron: Cron
    timezone: str
    start_at: datetime | None
    end_at: datetime | None
    rule: CalendarRule

    def slots_of(self, day: date) -> list[datetime]:
        """The unadjusted fire times of local date `day`, within the bounds."""
        if not self.cron.matches_day(day):
            return []
        found = day_fires(self.cron, self.timezone, day)
        if self.start_at is None and self.end_at is None:
            return found
        return [
            t
            for t in found
            if (self.start_at is None or t >= self.start_at)
            and (self.end_at is None or t <= self.end_at)
        ]

    def times_on(self, day: date) -> list[datetime]:
        """The distinct instants that run on local date `day`, ascending (`runs_on`'s,
        without building each slot's `Fire` on a day nothing moves onto)."""
        return list(_times_on(self, day))

    def times(
        self, start: datetime | None, end: datetime, limit: int | None, newest: bool
    ) -> list[datetime]:
        """The distinct fire times in `[start, end)`, ascending; `limit` of them at most,
        the oldest (or with `newest` the newest)."""
        found: list[datetime] = []
        if newest:
            day = min(self._local_date(end) + _ONE_DAY, _LAST_DAY)
            floor = _FIRST_DAY if start is None else self._local_date(start) - _ONE_DAY
            while day >= max(floor, _FIRST_DAY) and (limit is None or len(found) < limit):
                found += reversed(
                    [t for t in self.times_on(day) if t < end and (start is None or t >= start)]
                )
                day -= _ONE_DAY
            return (found if limit is None else found[:limit])[::-1]
        assert start is not None
        day = max(self._local_date(start) - _ONE_DAY, _FIRST_DAY)
        last = min(self._local_date(end) + _ONE_DAY, _LAST_DAY)
        while day <= last and (limit is None or len(found) < limit):
            found += [t for t in self.times_on(day) if start <= t < end]
            day += _ONE_DAY
        return found if limit is None else found[:limit]

    def runs_on(self, day: date) -> list[Fire]:
        """Everything that runs on local date `day`, ordered by (at, slot); none on a
        non-business day."""
        if not self.rule.is_business(day):
            return []
        if self.rule.short_session(day) is None and (
            self.rule.on_holiday == "skip" or self.rule.contributors(day) == [day]
        ):  # nothing moves onto or off it: its own slots, already in order (`_times_on`)
            return [Fire(slot, slot) for slot in self.slots_of(day)]
        tz = zone(self.timezone)
        found = []
        for source in self.rule.contributors(day):
            for slot in self.slots_of(source):
                if source == day:
                    found.append(Fire(slot, slot))
                    continue
                wall = slot.astimezone(tz).replace(tzinfo=None)
                (at,) = instants(datetime.combine(day, wall.time()), tz, True)
                local = slot.astimezone(tz)
                found.append(Fire(at, slot, self.moved_text(local, day)))
        short = self.rule.short_session(day)
        if short is not None:
            found = self._at_the_close(found, day, *short)
        return sorted(found)

    def _at_the_close(self, fires: list[Fire], day: date, close: time, name: str) -> list[Fire]:
        """`fires` of early-close day `day` with those later than the close run at it
        (`on_early_close = close`) or dropped (`skip`)."""
        tz = zone(self.timezone)
        (end,) = instants(datetime.combine(day, close), tz, True)
        kept = [f for f in fires if f.at <= end]
        if self.rule.on_early_close == "skip":
            return kept
        why = f"{self.rule.calendar.name} closes early on {_day_text(day)}: {name}"
        for fire in fires:
            if fire.at > end:
                local = fire.at.astimezone(tz)
                text = f"runs at the close, {close:%H:%M}, not {local:%H:%M}: {why}"
                kept.append(Fire(end, fire.slot, f"{fire.moved}; {text}" if fire.moved else text))
        return kept

    def early_text(self, slot: datetime) -> str:
        """Why the early close drops the slot `slot` (`on_early_close = skip`), or ''."""
        tz = zone(self.timezone)
        local = slot.astimezone(tz)
        target = self.rule.target(local.date())
        short = None if target is None else self.rule.short_session(target)
        if short is None:
            return ""
        close, name = short
        return (
            f"skipped: {self.rule.calendar.name} closes early on {_day_text(target)} at "
            f"{close:%H:%M}: {name} (on_early_close skip)"
        )

    def moved_text(self, local: datetime, day: date) -> str:
        """`moved from Fri 2026-12-25 09:00 to Mon 2026-12-28: NYSE holiday (Christmas Day)`."""
        source = local.date()
        return (
            f"moved from {_day_text(source)} {local:%H:%M} to {_day_text(day)}: "
            f"{self.rule.calendar.why_not(source)}"
        )

    def skipped_text(self, day: date) -> str:
        """Why the fire times of non-business `day` do not run (on_holiday skip, or no
        business day within `MAX_SHIFT` days)."""
        why = self.rule.calendar.why_not(day)
        if self.rule.on_holiday == "skip":
            return f"skipped on {_day_text(day)}: {why} (on_holiday skip)"
        return f"skipped on {_day_text(day)}: {why}, and no business day within {MAX_SHIFT} days"

    def forward(self, start: datetime) -> Iterator[Fire]:
        """Every fire with `at` at or after `start`, ascending."""
        day = max(self._local_date(start) - _ONE_DAY, _FIRST_DAY)
        while day <= _LAST_DAY:
            for fire in self.runs_on(day):
                if fire.at >= start:
                    yield fire
            day += _ONE_DAY

    def backward(self, end: datetime) -> Iterator[Fire]:
        """Every fire with `at` before `end`, descending."""
        day = min(self._local_date(end) + _ONE_DAY, _LAST_DAY)
        while day >= _FIRST_DAY:
            for fire in reversed(self.runs_on(day)):
                if fire.at < end:
                    yield fire
            day -= _ONE_DAY

    def fires(
        self, start: datetime | None, end: datetime, limit: int | None, newest: bool
    ) -> list[Fire]:
        """Fires with `at` in `[start, end)`, ordered by (at, slot); `limit` distinct
        instants at most, the oldest (or with `newest` the newest)."""
        found: list[Fire] = []
        seen: set[datetime] = set()
        if newest:
            for fire in self.backward(end):
                if start is not None and fire.at < start:
                    break
                if limit is not None and fire.at not in seen and len(seen) >= limit:
                    break
                seen.add(fire.at)
                found.append(fire)
            return found[::-1]
        assert start is not None
        for fire in self.forward(start):
            if fire.at >= end:
                break
            if limit is not None and fire.at not in seen and len(seen) >= limit:
                break
            seen.add(fire.at)
            found.append(fire)
        return found

    def at(self, instant: datetime) -> list[Fire]:
        """The fires that run at `instant` (its slots), oldest slot first."""
        day = self._local_date(instant)
        if self.rule.on_holiday == "skip" and self.rule.short_session(day) is None:
            # nothing moves: a fire time is its one slot
            times = _times_on(self, day)
            i = bisect_left(times, instant)
            return [Fire(instant, instant)] if i < len(times) and times[i] == instant else []
        return [f for f in self.runs_on(day) if f.at == instant]

    def due(self, slot: datetime) -> datetime | None:
        """When the unadjusted fire time `slot` runs (None: its calendar skips it)."""
        day = self._local_date(slot)
        target = self.rule.target(day)
        if target is None:
            return None
        if target == day and self.rule.short_session(day) is None:
            return slot
        return next((f.at for f in self.runs_on(target) if f.slot == slot), None)

    def what_of(self, slot: datetime) -> str:
        """What the calendar does to the unadjusted fire time `slot` ('' for nothing)."""
        tz = zone(self.timezone)
        local = slot.astimezone(tz)
        day = local.date()
        target = self.rule.target(day)
        if self.rule.is_business(day) and self.rule.short_session(day) is None:
            return ""
        if target is None:
            return self.skipped_text(day)
        for fire in self.runs_on(target):
            if fire.slot == slot:
                if not fire.moved:
                    return ""
                return f"{fire.moved}; runs at {fire.at.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"
        return self.early_text(slot) or self.moved_text(local, target)

    def closures(self, year: int) -> Iterator[tuple[date, date]]:
        """Each run of consecutive non-business days `[first, last]` that begins in `year`."""
        day, first = date(year, 1, 1), None
        while day <= date(year, 12, 31) or first is not None:
            if not self.rule.is_business(day):
                first = first or day
            elif first is not None:
                yield first, day - _ONE_DAY
                first = None
            day += _ONE_DAY
            if day > _LAST_DAY:
                break

    def _local_date(self, instant: datetime) -> date:
        return instant.astimezone(zone(self.timezone)).date()


@lru_cache(maxsize=4096)
def _times_on(grid: Grid, day: date) -> tuple[datetime, ...]:
    if not grid.rule.is_business(day):
        return ()
    if grid.rule.short_session(day) is None and (
        grid.rule.on_holiday == "skip" or grid.rule.contributors(day) == [day]
    ):
        return tuple(grid.slots_of(day))
    return tuple(sorted({fire.at for fire in grid.runs_on(day)}))
