"""A job's cron and IANA time zone as a Temporal `ScheduleSpec` that fires on DST days as
classic cron does.

`timing.firetimes` defines when a job fires (DESIGN.md, "Time zones and DST"): a
fixed-hour job whose local time falls in the spring-forward gap runs once at the first valid
instant after it; one in the repeated fall-back hour runs once, at the first occurrence; a
job with a wildcard or stepped hour follows elapsed time (23 hourly runs on a 23-hour day,
25 on a 25-hour day).

Temporal reads calendars in the spec's time zone, and near a DST change it does not do that
(measured on the dev server, 1.32; `calendar.go` explains it):

- a fixed time in the gap is skipped; a fixed time in the repeated hour runs twice west of
  Greenwich (New York) and once, at the *second* occurrence, at or east of it (London);
- at or east of Greenwich, Go's `time.Date` resolves a repeated local time to its later
  instant, and Temporal then replays the hour *before* the repeated one: `0 0 * * *` in
  London runs at 23:00Z and again at 00:00Z on 2027-10-31, and an hourly job loses the
  second 01:00;
- its `skip` calendars match local times, so they cannot tell the two 01:30s apart.

So a spec is compiled one of three ways:

- **Local**: calendars in the job's own zone, when no fire time of the job within the horizon
  is one Temporal gets wrong (every job in a zone without DST, 09:00 anywhere, 02:30 in
  London, an hourly job in New York). No horizon.
- **UTC, every hour**: a wildcard job firing every hour of every day (`*/5 * * * *` in
  London) is, in elapsed time, the same minutes of every UTC hour. No horizon.
- **UTC calendars with a horizon**: otherwise each local fire time is mapped to its instant
  with zoneinfo, and stretches of days with the same UTC time become year/month/day ranges,
  from 1 January of the current year to the end of the year `HORIZON_YEARS` ahead (3 to 9
  calendars a year). Past the horizon such a spec matches nothing, so `schedules sync`
  recompiles it once a year (`spec_outdated`); its offsets are those of the tz database of
  the process that compiled it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from datetime import UTC, date, datetime, time, timedelta
from functools import cache, lru_cache
from itertools import pairwise

from temporalio.client import ScheduleCalendarSpec, ScheduleRange, ScheduleSpec

from core.errors import CatalogError
from timing.cron import ALL_DAYS, ALL_HOURS, ALL_MONTHS, ALL_WEEKDAYS, Cron, parse_cron
from timing.firetimes import fixed_hour, instants, next_fire_time
from timing.zones import ZoneInfo, ZoneInfoNotFoundError

HORIZON_YEARS = 10
"""A UTC-compiled spec covers the rest of the current year and this many more."""

LAST_YEAR = 2100  # Temporal's calendars match no later year.
_ONE_DAY = timedelta(days=1)
_UNTIL = re.compile(r"as UTC until (\d{4}-\d{2}-\d{2})")

# One calendar as sets: (years, months, days of month, weekdays, hours, minutes, seconds).
# An empty `years` means every year.
Box = tuple[frozenset[int], ...]


def is_fixed_time(cron: str) -> bool:
    """Whether the job keeps its wall-clock time across DST changes (its hour field names
    hours outright: no `*`, no step), as `timing.firetimes` decides it."""
    return fixed_hour(cron)


def next_fire_times(
    cron: str,
    timezone: str,
    after: datetime,
    count: int,
    *,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
) -> list[datetime]:
    """The next `count` fire times (UTC) strictly after `after`, within the optional
    `start_at` / `end_at` bounds (inclusive, as Temporal's). Pure: the clock is `after`."""
    if start_at is not None:
        after = max(_utc(after), _utc(start_at) - timedelta(seconds=1))
    found: list[datetime] = []
    while len(found) < count:
        following = next_fire_time(cron, timezone, after)
        if following is None or (end_at is not None and following > end_at):
            break
        found.append(following)
        after = following
    return found


def compile_spec(
    cron: str,
    timezone: str,
    *,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    jitter: timedelta = timedelta(0),
    now: datetime,
) -> ScheduleSpec:
    """The `ScheduleSpec` whose fire times are `timing.firetimes`' for this job.

    Pure: `now` (with `start_at`) only places the horizon of a UTC compilation.

    Raises:
        CronError: the cron expression cannot be expressed as Temporal calendars.
        CatalogError: the time zone is unknown.
    """
    expr, zone, fixed = parse_cron(cron), _zone(timezone), fixed_hour(cron)
    begin = max(_utc(now), _utc(start_at)) if start_at else _utc(now)
    first, last = _window(zone, begin, end_at)
    spec = ScheduleSpec(start_at=start_at, end_at=end_at, jitter=jitter or None)
    clock = (frozenset(expr.hours), frozenset(expr.minutes), frozenset(expr.seconds))
    every_hour = expr.hours == ALL_HOURS and expr.years is None
    every_hour = every_hour and expr.day_rules == [(ALL_MONTHS, ALL_DAYS, ALL_WEEKDAYS)]
    if first > last or _temporal_fires_right(expr, zone, fixed, first, last):
        boxes = {(expr.years or frozenset(), *rule, *clock) for rule in expr.day_rules}
        spec.time_zone_name, comment = timezone, cron
    elif (
        not fixed
        and every_hour
        and (minute_shift := _common_minute_offset(zone, first, last)) is not None
    ):
        # Every hour of every day in elapsed time: the same minutes of every UTC hour.
        minutes = frozenset((m - minute_shift) % 60 for m in expr.minutes)
        boxes = {(frozenset(), ALL_MONTHS, ALL_DAYS, ALL_WEEKDAYS, ALL_HOURS, minutes, clock[2])}
        spec.time_zone_name, comment = "UTC", f"{cron} ({timezone}) as UTC"
    else:
        boxes = _merge(_utc_boxes(expr, zone, fixed, first, last))
        spec.time_zone_name = "UTC"
        comment = f"{cron} ({timezone}) as UTC until {last.isoformat()}"
    spec.calendars = [_calendar(box) for box in sorted(boxes, key=_box_order)]
    if spec.calendars:
        spec.calendars[0].comment = comment
    return spec


def compiled_until(spec: ScheduleSpec) -> date | None:
    """The last local date a UTC-compiled spec covers; None for a local one (no horizon)."""
    for calendar in spec.calendars:
        match = _UNTIL.search(calendar.comment or "")
        if match:
            return date.fromisoformat(match.group(1))
    return None


def spec_outdated(stored: ScheduleSpec, compiled: ScheduleSpec) -> bool:
    """Whether the spec on the server is not what compiling the job now gives: a horizon
    a year shorter, another tz database or compiler, or a spec from before them. The server
    keeps calendars exactly as sent, so this compares them as they are."""
    return (list(stored.cron_expressions), stored.time_zone_name, list(stored.calendars)) != (
        list(compiled.cron_expressions),
        compiled.time_zone_name,
        list(compiled.calendars),
    )


def describe_spec(spec: ScheduleSpec) -> str:
    """One line for sync's report: '31 calendars in UTC until 2036-12-31'."""
    count = len(spec.calendars) + len(spec.cron_expressions)
    until = compiled_until(spec)
    text = f"{count} calendar{'s' if count != 1 else ''} in {spec.time_zone_name or 'UTC'}"
    return f"{text} until {until}" if until else text


# --- time zones -------------------------------------------------------------------------


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CatalogError(f"time zone {name!r} is not a known IANA time zone") from None


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError(f"{moment} has no time zone; pass an aware datetime")
    return moment.astimezone(UTC)


@cache
def _transitions(zone_name: str, year: int) -> tuple[tuple[datetime, timedelta, timedelta], ...]:
    """(instant, offset before, offset after) of each UTC-offset change in `year` (UTC)."""
    zone = ZoneInfo(zone_name)
    found = []
    moment, end = datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
    step = timedelta(hours=6)  # no zone changes its offset twice within six hours
    offset = moment.astimezone(zone).utcoffset()
    while moment < end:
        following = moment + step
        new = following.astimezone(zone).utcoffset()
        if new != offset:
            lo, hi = int(moment.timestamp()), int(following.timestamp())
            while hi - lo > 1:  # the first second with the new offset
                mid = (lo + hi) // 2
                if datetime.fromtimestamp(mid, zone).utcoffset() == new:
                    hi = mid
                else:
                    lo = mid
            found.append((datetime.fromtimestamp(hi, UTC), offset, new))
            offset = new
        moment = following
    return tuple(found)


def _changes(
    zone: ZoneInfo, first: date, last: date
) -> Iterator[tuple[datetime, datetime, timedelta, timedelta]]:
    """For each offset change near [first, last]: the naive local span [low, high) that is
    skipped (spring forward) or repeated (fall back), and the offsets before and after."""
    for year in range(first.year - 1, last.year + 2):
        for instant, before, after in _transitions(zone.key, year):
            wall = instant.replace(tzinfo=None)
            low, high = sorted((wall + before, wall + after))
            if high.date() >= first and low.date() <= last:
                yield low, high, before, after


def _common_minute_offset(zone: ZoneInfo, first: date, last: date) -> int | None:
    """The minutes past the hour shared by every UTC offset of the window, if they agree."""
    noon = datetime.combine(first, time(12), tzinfo=zone).utcoffset()
    offsets = {
        noon,
        *(o for *_, before, after in _changes(zone, first, last) for o in (before, after)),
    }
    shifts = {o % timedelta(hours=1) for o in offsets}
    if len(shifts) != 1:
        return None
    (shift,) = shifts
    return None if shift % timedelta(minutes=1) else shift // timedelta(minutes=1)


def _window(zone: ZoneInfo, begin: datetime, end_at: datetime | None) -> tuple[date, date]:
    """The local dates a UTC compilation covers: whole years, from the one holding `begin`
    to `HORIZON_YEARS` later, so the spec stays the same all year long."""
    today = begin.astimezone(zone).date()
    first, last = date(today.year, 1, 1), date(min(today.year + HORIZON_YEARS, LAST_YEAR), 12, 31)
    if end_at is not None:
        last = min(last, _utc(end_at).astimezone(zone).date() + _ONE_DAY)
    return first, last


def _temporal_fires_right(expr: Cron, zone: ZoneInfo, fixed: bool, first: date, last: date) -> bool:
    """Whether calendars in the job's own zone make Temporal fire exactly firetimes' times
    on local dates [first, last] (the measured behaviour in the module docstring)."""
    hour = timedelta(hours=1)
    for low, high, before, after in _changes(zone, first, last):
        whole_hour = (
            high - low == hour and low.minute == low.second == 0 and low.date() == high.date()
        )
        if not whole_hour:  # Temporal's DST handling assumes one-hour changes
            risky = (low - hour, high + hour)
        elif after > before:  # spring forward: Temporal skips the local times in the gap
            risky = (low, high) if fixed else None
        elif before <= timedelta(0):  # fall back west of Greenwich: both occurrences run
            risky = (low, high) if fixed else None
        else:  # fall back at or east of Greenwich: the hour before is replayed
            risky = (low - hour, high)
        if risky is not None and _fires_within(expr, *risky):
            return False
    return True


def _fires_within(expr: Cron, low: datetime, high: datetime) -> bool:
    """Whether a local fire time of the job lies in [low, high) (naive local times)."""
    return any(
        low <= datetime.combine(day, time(*clock)) < high
        for day in _days(low.date(), high.date())
        if expr.matches_day(day)
        for clock in expr.times
    )


# --- UTC calendars ----------------------------------------------------------------------


def _utc_boxes(expr: Cron, zone: ZoneInfo, fixed: bool, first: date, last: date) -> list[Box]:
    """Boxes, in UTC, matching exactly the job's fire times on local dates [first, last].

    Between two days touched by an offset change one UTC offset holds all day: the matching
    days of such a stretch form a *run*, whose fire times are the local ones moved by that
    offset (some to the day before or after). A run needs only its first and last matching
    day, so a stretch costs a few `matches_day` calls at each end, not one per day. A change
    day whose times all move by one offset extends the run around it; one whose times do not
    gets boxes of its own, from `firetimes.instants`, and interrupts the run.
    """
    change_days = sorted(
        {
            day
            for low, high, *_ in _changes(zone, first, last)
            for day in _days(max(low.date(), first), min(high.date(), last))
        }
    )
    runs: list[list] = []  # [offset, first day, last day]; offset None: an odd day
    odd_days: dict[tuple[date, int], set[tuple[int, int, int]]] = defaultdict(set)

    def extend(offset: timedelta, start: date, stop: date) -> None:
        if runs and runs[-1][0] == offset:
            runs[-1][2] = stop
        else:
            runs.append([offset, start, stop])

    cursor = first
    for change_day in [*change_days, None]:
        stretch_end = last if change_day is None else change_day - _ONE_DAY
        start = cursor
        while start <= stretch_end and not expr.matches_day(start):
            start += _ONE_DAY
        if start <= stretch_end:
            stop = stretch_end
            while not expr.matches_day(stop):
                stop -= _ONE_DAY
            extend(datetime.combine(start, time(12), tzinfo=zone).utcoffset(), start, stop)
        if change_day is None:
            break
        cursor = change_day + _ONE_DAY
        if not expr.matches_day(change_day):
            continue
        fires = {
            clock: instants(datetime.combine(change_day, time(*clock)), zone, fixed)
            for clock in expr.times
        }
        offset = _one_offset(change_day, fires)
        if offset is not None:
            extend(offset, change_day, change_day)
            continue
        for moments in fires.values():
            for moment in moments:
                utc = moment.replace(tzinfo=None)
                key = (change_day, (utc.date() - change_day).days)
                odd_days[key].add((utc.hour, utc.minute, utc.second))
        runs.append([None, change_day, change_day])  # interrupts the run around it

    boxes: list[Box] = []
    for offset, start, stop in runs:
        if offset is None:
            continue
        moved: dict[int, set[tuple[int, int, int]]] = defaultdict(set)
        for clock in expr.times:
            utc = datetime.combine(start, time(*clock)) - offset
            moved[(utc.date() - start).days].add((utc.hour, utc.minute, utc.second))
        for shift, clocks in moved.items():
            for dates in _date_boxes(expr, shift, start, stop):
                boxes += [(*dates, *block) for block in _clock_blocks(clocks)]
    for (day, shift), clocks in odd_days.items():
        utc_day = day + timedelta(days=shift)
        dates = (frozenset({utc_day.year}), frozenset({utc_day.month}), frozenset({utc_day.day}))
        boxes += [(*dates, ALL_WEEKDAYS, *block) for block in _clock_blocks(clocks)]
    return boxes


def _one_offset(day: date, fires: dict[tuple[int, int, int], list[datetime]]) -> timedelta | None:
    """The offset every local time of `day` is moved by, if there is just one."""
    offsets = set()
    for clock, moments in fires.items():
        if len(moments) != 1:
            return None
        offsets.add(datetime.combine(day, time(*clock)) - moments[0].replace(tzinfo=None))
    return offsets.pop() if len(offsets) == 1 else None


def _date_boxes(expr: Cron, shift: int, start: date, stop: date) -> list[Box]:
    """(years, months, days, weekdays) boxes of the dates `shift` days after the job's
    matching local dates in [start, stop]. A shift moves weekdays along; where months, days
    of the month or years are restricted it falls back to explicit dates."""
    boxes: list[Box] = []
    delta = timedelta(days=shift)
    for months, days, weekdays in expr.day_rules:
        if shift == 0:
            found = _range_boxes(start, stop, months, days, weekdays)
            if expr.years is not None:  # a run may step over the years the cron leaves out
                found = [(b[0] & expr.years, *b[1:]) for b in found if b[0] & expr.years]
            boxes += found
        elif months == ALL_MONTHS and days == ALL_DAYS and expr.years is None:
            moved = frozenset((w + shift) % 7 for w in weekdays)
            boxes += _range_boxes(start + delta, stop + delta, months, days, moved)
        else:
            by_month: dict[tuple[int, int], set[int]] = defaultdict(set)
            for day in _days(start, stop):
                if day.month in months and day.day in days and day.isoweekday() % 7 in weekdays:
                    moved_day = day + delta
                    by_month[(moved_day.year, moved_day.month)].add(moved_day.day)
            boxes += [
                (frozenset({y}), frozenset({m}), frozenset(d), ALL_WEEKDAYS)
                for (y, m), d in by_month.items()
            ]
    return boxes


def _range_boxes(
    start: date,
    stop: date,
    months: frozenset[int],
    days: frozenset[int],
    weekdays: frozenset[int],
) -> list[Box]:
    """At most five boxes for the dates in [start, stop] matching (months, days, weekdays):
    a partial first month, whole months, whole years, whole months, a partial last month."""
    found: list[Box] = []

    def add(years: Iterable[int], month_span: Iterable[int], day_span: Iterable[int]) -> None:
        m, d = months & frozenset(month_span), days & frozenset(day_span)
        if m and d:
            found.append((frozenset(years), m, d, weekdays))

    if (start.year, start.month) == (stop.year, stop.month):
        add([start.year], [start.month], range(start.day, stop.day + 1))
        return found
    head = (start.year, start.month)
    if start.day > 1:
        add([start.year], [start.month], range(start.day, 32))
        head = _next_month(*head)
    tail = (stop.year, stop.month)
    if stop + _ONE_DAY != date(*_next_month(*tail), 1):
        add([stop.year], [stop.month], range(1, stop.day + 1))
        tail = _previous_month(*tail)
    if head > tail:
        return found
    if head[0] == tail[0]:
        add([head[0]], range(head[1], tail[1] + 1), ALL_DAYS)
    else:
        add([head[0]], range(head[1], 13), ALL_DAYS)
        add(range(head[0] + 1, tail[0]), ALL_MONTHS, ALL_DAYS)
        add([tail[0]], range(1, tail[1] + 1), ALL_DAYS)
    return [box for box in found if box[0]]


def _clock_blocks(clock: set[tuple[int, int, int]]) -> list[Box]:
    """Split (hour, minute, second) triples into hours x minutes x seconds blocks."""
    by_hour: dict[int, set[tuple[int, int]]] = defaultdict(set)
    for hour, minute, second in clock:
        by_hour[hour].add((minute, second))
    hours_for: dict[frozenset[tuple[int, int]], set[int]] = defaultdict(set)
    for hour, rest in by_hour.items():
        hours_for[frozenset(rest)].add(hour)
    blocks: list[Box] = []
    for rest, hours in hours_for.items():
        by_minute: dict[int, set[int]] = defaultdict(set)
        for minute, second in rest:
            by_minute[minute].add(second)
        minutes_for: dict[frozenset[int], set[int]] = defaultdict(set)
        for minute, seconds in by_minute.items():
            minutes_for[frozenset(seconds)].add(minute)
        blocks += [(frozenset(hours), frozenset(m), s) for s, m in minutes_for.items()]
    return blocks


def _merge(boxes: list[Box]) -> set[Box]:
    """Fewer boxes: boxes that differ in one field only become one with the union there."""
    merged = set(boxes)
    for field in (0, 1, 0, 2, 0):  # years, months, years, days, years
        groups: dict[Box, set[int]] = defaultdict(set)
        for box in merged:
            groups[box[:field] + box[field + 1 :]] |= box[field]
        merged = {(*rest[:field], frozenset(v), *rest[field:]) for rest, v in groups.items()}
    return merged


def _box_order(box: Box) -> tuple[int, ...]:
    return tuple(min(values, default=-1) for values in box)


def _calendar(box: Box) -> ScheduleCalendarSpec:
    years, months, days, weekdays, hours, minutes, seconds = box
    return ScheduleCalendarSpec(
        second=_ranges(seconds),
        minute=_ranges(minutes),
        hour=_ranges(hours),
        day_of_month=_ranges(days),
        month=_ranges(months),
        year=_ranges(years),
        day_of_week=_ranges(weekdays),
    )


@lru_cache(maxsize=4096)
def _ranges(values: frozenset[int]) -> tuple[ScheduleRange, ...]:
    """Compact ranges: one stepped range for an arithmetic series, else runs of neighbours.

    Cached: a compilation asks for the same few sets again and again (every hour, every
    day of the month ...), and `ScheduleRange` is frozen, so the tuples can be shared."""
    ordered = sorted(set(values))
    if len(ordered) >= 3:
        step = ordered[1] - ordered[0]
        if step > 1 and all(b - a == step for a, b in pairwise(ordered)):
            return (ScheduleRange(ordered[0], ordered[-1], step),)
    found: list[ScheduleRange] = []
    for value in ordered:
        if found and found[-1].end == value - 1:
            found[-1] = ScheduleRange(found[-1].start, value)
        else:
            found.append(ScheduleRange(value))
    return tuple(found)


def _days(start: date, stop: date) -> Iterator[date]:
    day = start
    while day <= stop:
        yield day
        day += _ONE_DAY


def _next_month(year: int, month: int) -> tuple[int, int]:
    return (year + 1, 1) if month == 12 else (year, month + 1)


def _previous_month(year: int, month: int) -> tuple[int, int]:
    return (year - 1, 12) if month == 1 else (year, month - 1)
