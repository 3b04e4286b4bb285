"""A calendar job's Temporal `ScheduleSpec`: calendars that name the adjusted fire times.

Why not the cron with exclude calendars (Temporal's "skip"): the server finds a schedule's
next time by stepping from one matching candidate to the next and testing each against the
excludes (`service/worker/scheduler/spec.go`, `GetNextTime`); an excluded day of a job that
fires every minute costs 1,440 candidates, of one that fires every second 86,400, and a
server with the compute limit (temporalio/temporal#11014) stops computing a schedule past a
bound of such candidates and leaves it idle until its spec changes. Excludes also cannot
move a run (`following`, `preceding`): only remove it.

So the spec names only instants that run: for each business day of the horizon, the local
times the cron gives it (its own fire times and those moved onto it), as UTC calendars
(year, month and days of the month, hours, minutes, seconds). A day with one UTC offset all
day whose runs all come from such days runs the cron's clock moved by that offset, so the
days of one offset make a handful of calendars a month whatever the cron's frequency; the
other days (an offset change touches them or a date moved onto them, or they are near
`start_at`/`end_at`) get their instants one by one (`Grid.runs_on`).

The horizon is whole years: the current one and `HORIZON_YEARS` more (3 calendars' worth of
holiday data, which the `holidays` package computes by rule and corrects release by
release). Past it the spec matches nothing, so `schedules sync` rewrites it once a year
(`compiled_until` reads the comment), and whenever the calendar's data changes (the first
calendar's comment names its version, and the calendars differ). Run sync at least once a
year, as for a UTC-compiled DST job.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime, time, timedelta

from temporalio.client import ScheduleSpec

from timing.business import MAX_SHIFT, Grid
from timing.calendars import (
    UTC_NAMES,
    Box,
    _box_order,
    _calendar,
    _clock_blocks,
    _comment,
    _merge,
)
from timing.cron import ALL_WEEKDAYS, LAST_YEAR
from timing.zones import TZDATA_VERSION, plain_offset, zone

HORIZON_YEARS = 2
"""A calendar job's spec covers the rest of the current year and this many more."""
_ONE_DAY = timedelta(days=1)
_NEAR_BOUND = timedelta(days=40)  # days this near a bound are compiled instant by instant


def compile_business_spec(
    grid: Grid, *, jitter: timedelta = timedelta(0), now: datetime
) -> ScheduleSpec:
    """The spec firing exactly `grid`'s adjusted fire times from 1 January of `now`'s year
    (local) to 31 December `HORIZON_YEARS` later, bounded by the job's own bounds."""
    tz = zone(grid.timezone)
    begin = max(now, grid.start_at) if grid.start_at else now
    first = date(begin.astimezone(tz).year, 1, 1)
    last = date(min(first.year + HORIZON_YEARS, LAST_YEAR), 12, 31)
    if grid.end_at is not None:  # a slot at the end may run up to MAX_SHIFT days later
        last = min(last, grid.end_at.astimezone(tz).date() + timedelta(days=MAX_SHIFT + 1))
    by_offset: dict[timedelta, list[date]] = defaultdict(list)
    odd: dict[date, set[tuple[int, int, int]]] = defaultdict(set)
    day = first
    while day <= last:
        if _outside_bounds(grid, day):
            pass  # no slot runs this day: every one it could run is outside the bounds
        elif grid.rule.is_business(day):
            offset = plain_offset(grid.timezone, day)
            sources = _sources(grid, day)
            plain = offset is not None and not _near_bounds(grid, day)
            plain = plain and grid.rule.short_session(day) is None
            if plain and all(plain_offset(grid.timezone, d) is not None for d in sources):
                if sources:
                    by_offset[offset].append(day)
            else:
                for fire in grid.runs_on(day):
                    utc = fire.at.astimezone(UTC)
                    odd[utc.date()].add((utc.hour, utc.minute, utc.second))
        day += _ONE_DAY
    boxes: list[Box] = []
    for offset, days in by_offset.items():
        moved: dict[int, set[tuple[int, int, int]]] = defaultdict(set)
        for clock in grid.cron.times:
            utc = datetime.combine(days[0], time(*clock)) - offset
            moved[(utc.date() - days[0]).days].add((utc.hour, utc.minute, utc.second))
        for shift, clocks in moved.items():
            boxes += _boxes([d + timedelta(days=shift) for d in days], clocks)
    for utc_day, clocks in odd.items():
        boxes += _boxes([utc_day], clocks)
    # No start_at / end_at on the spec: the bounds are on slots, and a moved slot may
    # run before its job's start (preceding) or after its end (following).
    spec = ScheduleSpec(jitter=jitter or None, time_zone_name="UTC")
    spec.calendars = [_calendar(box) for box in sorted(_merge(boxes), key=_box_order)]
    version = "" if grid.timezone in UTC_NAMES else f", tzdata {TZDATA_VERSION}"
    rest = (
        f"({grid.timezone}{version}) on {grid.rule.label} ({grid.rule.calendar.version}) "
        f"as UTC until {last.isoformat()}"
    )
    if spec.calendars:
        spec.calendars[0].comment = _comment(grid.cron.text, rest)
    return spec


def _outside_bounds(grid: Grid, day: date) -> bool:
    noon = datetime.combine(day, time(12), tzinfo=UTC)
    return (grid.start_at is not None and noon < grid.start_at - _NEAR_BOUND) or (
        grid.end_at is not None and noon > grid.end_at + _NEAR_BOUND
    )


def _near_bounds(grid: Grid, day: date) -> bool:
    noon = datetime.combine(day, time(12), tzinfo=UTC)
    return any(
        bound is not None and abs(bound - noon) < _NEAR_BOUND
        for bound in (grid.start_at, grid.end_at)
    )


def _sources(grid: Grid, day: date) -> list[date]:
    """The dates the cron matches whose fire times run on business day `day` (its own, and
    those moved onto it). When they all have one UTC offset all day, as `day` has, the
    day runs the cron's clock: each source's times are the cron's, kept on the wall clock."""
    return [d for d in grid.rule.contributors(day) if grid.cron.matches_day(d)]


def _boxes(days: list[date], clocks: set[tuple[int, int, int]]) -> list[Box]:
    """(year, month, days of the month) x clock boxes naming `clocks` on each of `days`."""
    by_month: dict[tuple[int, int], set[int]] = defaultdict(set)
    for day in days:
        by_month[(day.year, day.month)].add(day.day)
    blocks = _clock_blocks(clocks)
    return [
        (frozenset({y}), frozenset({m}), frozenset(d), ALL_WEEKDAYS, *block)
        for (y, m), d in by_month.items()
        for block in blocks
    ]
