"""Cron expressions as the sets of values each field allows, read as `timing.firetimes` reads them.

`firetimes` defines when a job fires (croniter's reading, Temporal's field layout); the
schedule compiler needs the same expression as plain sets to build Temporal calendars. Both
go through croniter, so they cannot disagree on what a field means:

- 5 fields (minute hour day-of-month month day-of-week), 6 (the same plus a year, as
  Temporal reads it), 7 (second first, year last), or an `@daily`-style alias.
- When both day-of-month and day-of-week are restricted, a day matches if *either* does
  (`0 9 1 * 1`: the 1st of the month and every Monday). Temporal's calendars need both to
  match, so the compiler emits one calendar per side (`Cron.day_rules`).
- Syntax Temporal cannot express (`L`, `W`, `#`, hashed `H`) is refused here, with the
  expression in the message, rather than at the server.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from croniter import CroniterError, croniter

from core.errors import CatalogError

ALL_SECONDS = frozenset(range(60))
ALL_MINUTES = frozenset(range(60))
ALL_HOURS = frozenset(range(24))
ALL_DAYS = frozenset(range(1, 32))
ALL_MONTHS = frozenset(range(1, 13))
ALL_WEEKDAYS = frozenset(range(7))


class CronError(CatalogError, ValueError):
    """A cron expression this project cannot compile (the message names the expression)."""


@dataclass(frozen=True)
class Cron:
    """A parsed cron expression: the values each field allows (weekday 0 is Sunday).

    `years` is None when every year matches.
    """

    text: str
    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    years: frozenset[int] | None
    days_or_weekdays: bool

    @property
    def times(self) -> list[tuple[int, int, int]]:
        """Every (hour, minute, second) of a matching day, in order."""
        return [
            (h, m, s)
            for h in sorted(self.hours)
            for m in sorted(self.minutes)
            for s in sorted(self.seconds)
        ]

    @property
    def day_rules(self) -> list[tuple[frozenset[int], frozenset[int], frozenset[int]]]:
        """(months, days of month, weekdays) triples; a day matches if any triple does."""
        if self.days_or_weekdays:
            return [
                (self.months, self.days, ALL_WEEKDAYS),
                (self.months, ALL_DAYS, self.weekdays),
            ]
        return [(self.months, self.days, self.weekdays)]

    def matches_day(self, day: date) -> bool:
        """Whether `day` (a local date) is one the job runs on."""
        if self.years is not None and day.year not in self.years:
            return False
        weekday = day.isoweekday() % 7
        return any(
            day.month in months and day.day in days and weekday in weekdays
            for months, days, weekdays in self.day_rules
        )


def parse_cron(text: str) -> Cron:
    """Parse `text` into field sets.

    Raises:
        CronError: the expression is malformed or uses syntax Temporal cannot express.
    """
    fields = text.split()
    # As timing.firetimes: Temporal's 6th field is a year; its 7-field form is
    # second-first. croniter reads both when given a leading second.
    form, seconds_first = text, len(fields) == 7
    if len(fields) == 6:
        form, seconds_first = f"0 {text}", True
    try:
        expanded, nth_weekday = croniter.expand(form, second_at_beginning=seconds_first)
    except (CroniterError, ValueError) as exc:
        raise CronError(f"cron {text!r} is not a valid cron expression: {exc}") from None
    if nth_weekday:
        raise CronError(f"cron {text!r}: 'weekday#n' is not supported by Temporal schedules")
    minute, hour, day, month, weekday = expanded[:5]
    second = expanded[5] if len(expanded) > 5 else [0]
    year = expanded[6] if len(expanded) > 6 else ["*"]

    def values(field: list, every: frozenset[int], name: str) -> frozenset[int]:
        if field == ["*"]:
            return every
        if not all(isinstance(v, int) for v in field):
            raise CronError(f"cron {text!r}: {name} field uses syntax Temporal cannot express")
        return frozenset(v % 7 if name == "day-of-week" else v for v in field)

    return Cron(
        text=text,
        seconds=values(second, ALL_SECONDS, "second"),
        minutes=values(minute, ALL_MINUTES, "minute"),
        hours=values(hour, ALL_HOURS, "hour"),
        days=values(day, ALL_DAYS, "day-of-month"),
        months=values(month, ALL_MONTHS, "month"),
        weekdays=values(weekday, ALL_WEEKDAYS, "day-of-week"),
        years=None if year == ["*"] else values(year, frozenset(), "year"),
        # croniter's rule, so firetimes agrees: OR unless one side is `*`.
        days_or_weekdays=day != ["*"] and weekday != ["*"],
    )
