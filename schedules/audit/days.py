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
  after the gap; one it has twice, at the first.
"""

from __future__ import annotations

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


@dataclass(frozen=True)
class Days:
    """Open days and what a closed day's slot does."""

    base: str | None
    on_holiday: str
    extra_off: frozenset[date] = field(default_factory=frozenset)
    extra_on: frozenset[date] = field(default_factory=frozenset)

    @classmethod
    def of(cls, definition: Any, on_holiday: str | None) -> Days | None:
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
        if day == local.date():
            return slot
        wall = datetime.combine(day, local.time().replace(tzinfo=None))
        while True:  # the first instant whose wall clock is `wall` or, in a gap, after it
            first = wall.replace(tzinfo=tz, fold=0)
            if first.astimezone(UTC).astimezone(tz).replace(tzinfo=None) == wall:
                return first.astimezone(UTC)
            wall = (wall + timedelta(minutes=1)).replace(second=0, microsecond=0)
