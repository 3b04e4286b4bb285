"""The audit's own reading of a job's business calendar, written apart from `timing/`.

The holidays themselves are data: the `holidays` package's dates and weekend for the
calendar's base (as the engine is documented to use), and the extra holidays and working
days of the catalog entry. The rules are stated again here, from docs/calendars.md:

- a day is open when it is an extra working day; else closed when it is an extra holiday, a
  holiday of the base or a weekend day of the base (an official working weekend of the base
  is open);
- `skip`: a slot of a closed day does not run; `following` / `preceding`: it runs on the
  next / previous open day, at the wall-clock time it had; `modified_following`: the next
  open day unless that is in another month, else the previous one; never more than
  `MAX_SHIFT` days away (else it does not run);
- a wall-clock time the target day does not have (spring forward) runs at the first instant
  after the gap; one it has twice, at the first;
- on a market's short session (the base's `half_day` dates, whose names give the hour:
  "markets close at 1:00pm"), a slot due after the close runs at the close under
  `on_early_close = "close"` and does not run under `"skip"`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, tzinfo
from functools import cache
from typing import Any

import holidays

MAX_SHIFT = 31  # the documented reach of a move, stated here again
_DAY = timedelta(days=1)


@cache
def _base(code: str) -> Any:
    if code in holidays.list_supported_financial():
        return holidays.financial_holidays(code)
    country, _, subdiv = code.partition("-")
    return holidays.country_holidays(country, subdiv=subdiv or None)


_CLOSE_WORDS = re.compile(r"close at (\d{1,2}):(\d{2})(am|pm)")


@cache
def _short_sessions(code: str) -> Any:
    return holidays.financial_holidays(code, categories=("half_day",))


def _close_of(code: str, day: date) -> tuple[int, int] | None:
    """(hour, minute) of the market's close on `day` when it is a short session, as the
    package's name of the day says it."""
    if code not in holidays.list_supported_financial():
        return None
    name = _short_sessions(code).get(day)
    found = _CLOSE_WORDS.search(name or "")
    if found is None:
        return None
    hour, minute, half = int(found[1]), int(found[2]), found[3]
    return (hour % 12 + (12 if half == "pm" else 0), minute)


@dataclass(frozen=True)
class Days:
    """Open days and what a closed day's slot does."""

    base: str | None
    on_holiday: str
    extra_off: frozenset[date] = field(default_factory=frozenset)
    extra_on: frozenset[date] = field(default_factory=frozenset)
    on_early_close: str = "keep"

    @classmethod
    def of(
        cls, definition: Any, on_holiday: str | None, on_early_close: str | None = None
    ) -> Days | None:
        """From a catalog entry's `calendar_definition` (a model or its dict) and rule."""
        if definition is None:
            return None
        data = definition if isinstance(definition, dict) else definition.model_dump()

        def dates(key: str) -> frozenset[date]:
            return frozenset(date.fromisoformat(str(d)) for d in data.get(key) or ())

        return cls(
            data.get("base"),
            on_holiday or "skip",
            dates("extra_holidays"),
            dates("extra_working_days"),
            on_early_close or "keep",
        )

    def open(self, day: date) -> bool:
        """Extras first (a working day wins), then the base's weekend and holidays."""
        if day in self.extra_on or day in self.extra_off:
            return day in self.extra_on
        if self.base is None:
            return day.isoweekday() <= 5
        base = _base(self.base)
        if day.weekday() in base.weekend:
            return day in base.weekend_workdays
        return day not in base

    def _near(self, day: date, step: timedelta) -> date | None:
        for n in range(1, MAX_SHIFT + 1):
            if self.open(day + n * step):
                return day + n * step
        return None

    def target(self, day: date) -> date | None:
        """The open day a slot of `day` runs on (None: it does not run)."""
        if self.open(day):
            return day
        after, before = self._near(day, _DAY), self._near(day, -_DAY)
        same_month = after if after is not None and after.month == day.month else before
        rules = {"following": after, "preceding": before, "modified_following": same_month}
        return rules.get(self.on_holiday)  # skip: none

    def due(self, slot: datetime, tz: tzinfo) -> datetime | None:
        """When `slot` runs (UTC), or None if its calendar drops it."""
        local = slot.astimezone(tz)
        day = self.target(local.date())
        if day is None:
            return None
        when = slot if day == local.date() else _first_at(datetime.combine(day, local.time()), tz)
        close = None if self.on_early_close == "keep" else _close_of(self.base or "", day)
        if close is None:
            return when
        end = _first_at(
            datetime.combine(day, datetime.min.time()).replace(hour=close[0], minute=close[1]), tz
        )
        if when <= end:
            return when
        return end if self.on_early_close == "close" else None


def _first_at(wall: datetime, tz: tzinfo) -> datetime:
    """The first instant whose wall clock is `wall` or, in a gap, after it (UTC)."""
    wall = wall.replace(tzinfo=None)
    while True:
        first = wall.replace(tzinfo=tz, fold=0)
        if first.astimezone(UTC).astimezone(tz).replace(tzinfo=None) == wall:
            return first.astimezone(UTC)
        wall = (wall + timedelta(minutes=1)).replace(second=0, microsecond=0)
