"""The cron grammar: the one reading of a cron expression, in validation, computation, sync
and `next` alike.

Temporal's own field layout, so a cron means here what it means to Temporal:

- 5 fields: `minute hour day-of-month month day-of-week`;
- 6 fields: the same and a `year` (`30 2 * * * 2028`); a year of `*` is refused (it reads
  like seconds first, `0 0 2 * * *`, which Temporal would run on the 2nd of each month);
- 7 fields: `second minute hour day-of-month month day-of-week year`;
- an alias: `@yearly` / `@annually` (`0 0 1 1 *`), `@monthly` (`0 0 1 * *`), `@weekly`
  (`0 0 * * 0`), `@daily` / `@midnight` (`0 0 * * *`), `@hourly` (`0 * * * *`). `@every`
  is refused: a fixed period is the catalog's `interval`.

A field is a comma-separated list of `*`, `N`, `N-M` (N <= M), each optionally stepped
(`*/15`, `5/15` = 5 to the field's maximum, `1-10/3`). Ranges: second and minute 0-59, hour
0-23, day-of-month 1-31, month 1-12 or `jan`-`dec`, day-of-week 0-7 (0 and 7 are Sunday) or
`sun`-`sat`, year 2000-2100 (Temporal's calendars know no other). Names are the three-letter
English ones, in any case. Refused, with the field named: `L`, `W`, `#` (nth weekday),
hashed `H`, `?`, ranges that run backwards, steps below 1, and a day-of-month that no month
of the expression has (`0 0 30 2 *` never fires).

When both day-of-month and day-of-week are something other than `*`, a day matches if
*either* does (`0 9 1 * 1`: the 1st of the month and every Monday), as in classic cron.
Temporal's calendars need both to match, so the compiler emits one calendar per side.

A job is *fixed-hour* when its hour field names hours outright (no `*`, no step): it keeps
its wall-clock time across DST changes; any other job follows elapsed time
(`timing.firetimes`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta
from functools import cached_property, lru_cache
from itertools import pairwise

from core.errors import CatalogError

ALL_SECONDS = frozenset(range(60))
ALL_MINUTES = frozenset(range(60))
ALL_HOURS = frozenset(range(24))
ALL_DAYS = frozenset(range(1, 32))
ALL_MONTHS = frozenset(range(1, 13))
ALL_WEEKDAYS = frozenset(range(7))
FIRST_YEAR, LAST_YEAR = 2000, 2100  # the years Temporal's calendars can name

ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
LAYOUTS = {
    5: ("minute", "hour", "day-of-month", "month", "day-of-week"),
    6: ("minute", "hour", "day-of-month", "month", "day-of-week", "year"),
    7: ("second", "minute", "hour", "day-of-month", "month", "day-of-week", "year"),
}
BOUNDS = {
    "second": (0, 59),
    "minute": (0, 59),
    "hour": (0, 23),
    "day-of-month": (1, 31),
    "month": (1, 12),
    "day-of-week": (0, 7),
    "year": (FIRST_YEAR, LAST_YEAR),
}
NAMES = {
    "month": {
        n: i + 1 for i, n in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split())
    },
    "day-of-week": {n: i for i, n in enumerate("sun mon tue wed thu fri sat".split())},
}
MONTH_NAMES = (
    "January February March April May June July August September October November December"
).split()
_ELEMENT = re.compile(r"^(?P<base>\*|[0-9a-z]+(?:-[0-9a-z]+)?)(?:/(?P<step>[0-9]+))?$")


class CronError(CatalogError, ValueError):
    """A cron expression outside the grammar: says which field, which value and why.

    `str()` is the whole story (`cron '0 0 30 2 *': day-of-month '30' never fires: ...`);
    `detail` is the same without the expression, for messages that show it elsewhere.
    """

    def __init__(self, text: str, field_name: str, value: str, reason: str) -> None:
        self.text, self.field, self.value, self.reason = text, field_name, value, reason
        if field_name == "cron":
            self.detail = reason
        else:
            self.detail = f"{field_name} {value!r} {reason}"
        super().__init__(f"cron {text!r}: {self.detail}")


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
    fixed_hour: bool = field(default=True)

    @cached_property
    def times(self) -> tuple[tuple[int, int, int], ...]:
        """Every (hour, minute, second) of a matching day, in order."""
        return tuple(
            (h, m, s)
            for h in sorted(self.hours)
            for m in sorted(self.minutes)
            for s in sorted(self.seconds)
        )

    @cached_property
    def day_seconds(self) -> tuple[int, ...]:
        """`times` as seconds after local midnight."""
        return tuple(h * 3600 + m * 60 + s for h, m, s in self.times)

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
        if day.month not in self.months:
            return False
        weekday = day.isoweekday() % 7
        if self.days_or_weekdays:
            return day.day in self.days or weekday in self.weekdays
        return day.day in self.days and weekday in self.weekdays

    def days_of_month(self, year: int, month: int) -> tuple[int, ...]:
        """The days of `month` of `year` the job runs on, in order."""
        return _days_of_month(self, year, month)

    def matching_days(self, first: date, last: date, *, reverse: bool = False) -> Iterator[date]:
        """The local dates in `[first, last]` the job runs on, in order (or newest first)."""
        if first > last:
            return
        years = range(first.year, last.year + 1)
        months = sorted(self.months)
        for y in reversed(years) if reverse else years:
            if self.years is not None and y not in self.years:
                continue
            for m in reversed(months) if reverse else months:
                if (y, m) < (first.year, first.month) or (y, m) > (last.year, last.month):
                    continue
                days = self.days_of_month(y, m)
                for d in reversed(days) if reverse else days:
                    day = date(y, m, d)
                    if first <= day <= last:
                        yield day

    def shortest_gap(self) -> timedelta:
        """The shortest time between two fire times by the wall clock (DST aside)."""
        seconds = self.day_seconds
        gaps = [b - a for a, b in pairwise(seconds)]
        days = _shortest_day_gap(
            self.days, self.months, self.weekdays, self.years, self.days_or_weekdays
        )
        if days is not None:
            gaps.append(days * 86400 - seconds[-1] + seconds[0])
        return timedelta(seconds=min(gaps)) if gaps else timedelta.max


@lru_cache(maxsize=4096)
def _shortest_day_gap(
    days: frozenset[int],
    months: frozenset[int],
    weekdays: frozenset[int],
    years: frozenset[int] | None,
    days_or_weekdays: bool,
) -> int | None:
    """The fewest days between two matching days (None: fewer than two in 800 days).

    A function of the day fields alone, cached: a catalog's crons differ in their times far
    more than in their days, and scanning 800 days per job cost most of validating one.
    """
    midnight = frozenset({0})
    cron = Cron("", midnight, midnight, midnight, days, months, weekdays, years, days_or_weekdays)
    start = date(min(years) if years else 2001, 1, 1)
    found = list(cron.matching_days(start, start + timedelta(days=800)))
    return min(((b - a).days for a, b in pairwise(found)), default=None)


@lru_cache(maxsize=65536)
def _days_of_month(cron: Cron, year: int, month: int) -> tuple[int, ...]:
    if (cron.years is not None and year not in cron.years) or month not in cron.months:
        return ()
    first_weekday = date(year, month, 1).isoweekday() % 7
    found = []
    for d in range(1, days_in_month(year, month) + 1):
        in_days = d in cron.days
        in_weekdays = (first_weekday + d - 1) % 7 in cron.weekdays
        if (in_days or in_weekdays) if cron.days_or_weekdays else (in_days and in_weekdays):
            found.append(d)
    return tuple(found)


def days_in_month(year: int, month: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


@lru_cache(maxsize=8192)
def parse_cron(text: str) -> Cron:
    """Parse `text` into field sets (cached: expressions repeat across a catalog).

    Raises:
        CronError: the expression is outside the grammar, naming field, value and reason.
    """
    if not isinstance(text, str):
        raise CronError(str(text), "cron", str(text), "must be a string")
    expression = text.strip()
    if not expression:
        raise CronError(text, "cron", text, "is empty")
    if expression.startswith("@"):
        expression = _alias(text, expression)
    elif expression.split()[0].upper().startswith(("TZ=", "CRON_TZ=")):
        raise CronError(
            text, "cron", text, "names a time zone: the job's `timezone` field gives it"
        )
    tokens = expression.split()
    layout = LAYOUTS.get(len(tokens))
    if layout is None:
        raise CronError(
            text,
            "cron",
            text,
            f"has {len(tokens)} field{'s' if len(tokens) != 1 else ''}; give 5 (minute hour "
            "day-of-month month day-of-week), 6 (the same and a year) or 7 (second minute "
            "hour day-of-month month day-of-week year)",
        )
    if len(tokens) == 6 and tokens[5] == "*":
        # Temporal reads it as the 5-field cron with any year: written so, it is far more
        # likely seconds first (Quartz, Spring), and `0 0 2 * * *` would silently run at
        # 00:00 on the 2nd of each month instead of 02:00 daily.
        raise CronError(
            text,
            "cron",
            text,
            "has 6 fields ending in '*': Temporal reads them as minute hour day-of-month "
            "month day-of-week year, not with seconds first; give 5 fields, or 7 for "
            "seconds (second minute hour day-of-month month day-of-week year)",
        )
    given = dict(zip(layout, tokens, strict=True))
    values = {name: _field(text, name, given.get(name, "0")) for name in LAYOUTS[7][:-1]}
    years = None if given.get("year", "*") == "*" else _field(text, "year", given["year"])
    cron = Cron(
        text=text,
        seconds=values["second"],
        minutes=values["minute"],
        hours=values["hour"],
        days=values["day-of-month"],
        months=values["month"],
        weekdays=frozenset(v % 7 for v in values["day-of-week"]),
        years=years,
        days_or_weekdays=given["day-of-month"] != "*" and given["day-of-week"] != "*",
        fixed_hour="*" not in given["hour"] and "/" not in given["hour"],
    )
    _check_some_day(cron, given)
    return cron


def _alias(text: str, expression: str) -> str:
    name = expression.lower()
    if name in ALIASES:
        return ALIASES[name]
    if name.split()[0] == "@every":
        reason = "is not a cron: give the job `interval = ...` for a fixed period"
    else:
        reason = f"is not a known alias; use one of {', '.join(ALIASES)}"
    raise CronError(text, "cron", text, reason)


def _field(text: str, name: str, value: str) -> frozenset[int]:
    """The values one field allows."""
    low, high = BOUNDS[name]
    found: set[int] = set()
    for element in value.lower().split(","):
        if not element:
            raise CronError(text, name, value, "has an empty list item")
        _refuse_special(text, name, value, element)
        match = _ELEMENT.match(element)
        if match is None:
            raise CronError(text, name, value, f"is not a value, range or step of {low}-{high}")
        base, step_text = match["base"], match["step"]
        step = 1 if step_text is None else int(step_text)
        if step < 1:
            raise CronError(text, name, value, "has a step below 1")
        if base == "*":
            start, stop = low, high
        elif "-" in base:
            first, last = base.split("-")
            start, stop = _value(text, name, value, first), _value(text, name, value, last)
            if stop < start:
                raise CronError(
                    text, name, value, f"has a range that runs backwards ({first}-{last})"
                )
        else:
            start = _value(text, name, value, base)
            stop = high if step_text is not None else start  # `5/15`: 5 to the maximum
        found.update(range(start, stop + 1, step))
    return frozenset(found)


def _refuse_special(text: str, name: str, value: str, element: str) -> None:
    """The extensions of other cron dialects, each refused by what it means. (No name of
    a day of the week contains `l`, none of a day of the month exists, and no name starts
    with `h`, so these letters cannot be names.)"""
    if "#" in element:
        reason = "uses '#' (nth weekday of the month), which Temporal calendars cannot express"
    elif element == "?":
        reason = "uses '?'; write '*'"
    elif "l" in element and name in ("day-of-month", "day-of-week"):
        reason = "uses 'L' (last day), which Temporal calendars cannot express"
    elif "w" in element and name == "day-of-month":
        reason = "uses 'W' (nearest weekday), which Temporal calendars cannot express"
    elif element.startswith("h"):
        reason = "uses hashed 'H' values, which Temporal calendars cannot express"
    else:
        return
    raise CronError(text, name, value, reason)


def _value(text: str, name: str, value: str, token: str) -> int:
    low, high = BOUNDS[name]
    if token.isdigit():
        number = int(token)
    elif token in NAMES.get(name, {}):
        number = NAMES[name][token]
    else:
        names = NAMES.get(name)
        known = f" or {', '.join(names)}" if names else ""
        raise CronError(text, name, value, f"is not a value: {token!r} is not {low}-{high}{known}")
    if not low <= number <= high:
        raise CronError(text, name, value, f"is out of range: {number} is not {low}-{high}")
    return number


def _check_some_day(cron: Cron, given: dict[str, str]) -> None:
    """Refuse an expression whose day-of-month no month (of its years) has."""
    if cron.days_or_weekdays or given["day-of-week"] != "*":
        return  # a weekday is in every month
    years = sorted(cron.years) if cron.years is not None else [2000]  # 2000 is a leap year
    if any(min(cron.days) <= days_in_month(y, m) for y in years for m in cron.months):
        return
    months = sorted(cron.months)
    if len(months) == 1:
        where = MONTH_NAMES[months[0] - 1]
        if cron.years is not None:
            where += f" {years[0]}" if len(years) == 1 else f" of {given['year']}"
        has = max(days_in_month(y, months[0]) for y in years)
        reason = f"never fires: {where} has {has} days"
    else:
        reason = f"never fires: no month in {given['month']!r} has such a day"
    raise CronError(cron.text, "day-of-month", given["day-of-month"], reason)
