"""A job's timing as a Temporal `ScheduleSpec` that fires the job's intended times, DST included.

`timing.firetimes` defines when a job fires (its module docstring states the rules): a
fixed-hour job whose local time falls in the spring-forward gap runs once at the first valid
instant after it; one in the repeated fall-back span runs once, at the first occurrence; a
job with a wildcard or stepped hour follows elapsed time.

Temporal reads calendars in the spec's time zone and, near an offset change, does not do
that (`timing.temporal_model` is its matching, ported from the server): it skips a fixed
time in the gap, runs a repeated one twice west of Greenwich and the hour before it twice
at or east of it, and on a day whose local midnight does not exist it takes the weekday of
the day before. So a spec is compiled one of four ways, the first that applies:

- **Local, no change**: calendars in the job's own zone when the zone does not change its
  offset within the horizon (UTC, Asia/Tokyo): nothing for Temporal to get wrong.
- **UTC, every hour**: a wildcard job firing every hour of every day (`0 * * * *`,
  `*/5 * * * *`) is, in elapsed time, the same minutes of every UTC hour, whatever the
  zone does. No horizon, and no time zone database on the server involved.
- **Local, by evidence**: calendars in the job's own zone, when the model of Temporal's
  matching gives exactly the intended fire times on every local day an offset change
  touches within the horizon (with a day either side). Between changes the two agree by
  construction: a calendar in a zone with one offset all day matches the day's wall-clock
  times, which is what the intended rules say. 09:00 anywhere, 02:30 in London, a
  weekday job in New York stay local. No horizon in the spec; the evidence covers the
  same years as a UTC compilation, and sync recompiles every year.
- **UTC calendars with a horizon**: otherwise each local fire time is mapped to its instant
  and stretches of days with the same UTC time become year/month/day ranges, from 1 January
  of the current year to the end of the year `HORIZON_YEARS` ahead (3 to 9 calendars a
  year). Past the horizon such a spec matches nothing, so `schedules sync` recompiles it
  once a year (`spec_outdated`). `utc=True` asks for this form whatever the evidence says:
  sync's recovery when the server's own time zone database disagrees (`schedules.health.verify`).

Local calendars are evaluated by the server with *its* time zone database; UTC ones carry
this project's (`timing.zones`). The first calendar's comment names the form, and for a
zone other than UTC the tzdata release, so a database update makes sync rewrite and
re-verify the spec.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from itertools import pairwise

from temporalio.client import ScheduleCalendarSpec, ScheduleRange, ScheduleSpec

from timing.cron import ALL_DAYS, ALL_HOURS, ALL_MONTHS, ALL_WEEKDAYS, LAST_YEAR, Cron
from timing.firetimes import cron_fires, instants
from timing.temporal_model import Model
from timing.zones import TZDATA_VERSION, ZoneInfo, offset_changes_between, zone

HORIZON_YEARS = 10
"""A UTC-compiled spec covers the rest of the current year and this many more."""

_ONE_DAY = timedelta(days=1)
_UNTIL = re.compile(r"as UTC until (\d{4}-\d{2}-\d{2})")
FORCED = "server tz differs"
"""The comment's mark of a spec compiled to UTC because the server's database disagreed."""
_COMMENT_MAX = 200  # Temporal's limit on a calendar comment
UTC_NAMES = frozenset({"UTC", "Etc/UTC", "Etc/Universal", "Etc/Zulu", "Universal", "Zulu"})
"""Names of UTC itself: no offset ever changes, on any server."""

# One calendar as sets: (years, months, days of month, weekdays, hours, minutes, seconds).
# An empty `years` means every year.
Box = tuple[frozenset[int], ...]


def compile_spec(
    cron: Cron,
    timezone: str,
    *,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    jitter: timedelta = timedelta(0),
    now: datetime,
    utc: bool = False,
) -> ScheduleSpec:
    """The `ScheduleSpec` whose fire times are `timing.firetimes`' for this job.

    Pure: `now` (with `start_at`) only places the horizon. `utc` skips the local form. The
    cron comes parsed (`timing.Timing.expression`): it is never read from its text again.

    Raises:
        UnknownZoneError: the time zone is not in the database (`timing.zones`).
    """
    expr, tz = cron, zone(timezone)
    begin = max(_utc(now), _utc(start_at)) if start_at else _utc(now)
    first, last = _window(timezone, begin, end_at)
    spec = ScheduleSpec(start_at=start_at, end_at=end_at, jitter=jitter or None)
    clock = (frozenset(expr.hours), frozenset(expr.minutes), frozenset(expr.seconds))
    every_hour = expr.hours == ALL_HOURS and expr.years is None
    every_hour = every_hour and expr.day_rules == [(ALL_MONTHS, ALL_DAYS, ALL_WEEKDAYS)]
    version = "" if timezone in UTC_NAMES else f", tzdata {TZDATA_VERSION}"
    forced = f", {FORCED}" if utc else ""
    changing = first <= last and bool(change_windows(timezone, first, last))
    minute_shift = None
    if changing and every_hour and not expr.fixed_hour:
        minute_shift = _common_minute_offset(timezone, first, last)
    if not utc and (
        not changing
        or (minute_shift is None and local_is_right(expr, timezone, start_at, end_at, first, last))
    ):
        boxes = {(expr.years or frozenset(), *rule, *clock) for rule in expr.day_rules}
        spec.time_zone_name, comment = timezone, f"({timezone}{version})"
    elif minute_shift is not None:
        # Every hour of every day in elapsed time: the same minutes of every UTC hour.
        minutes = frozenset((m - minute_shift) % 60 for m in expr.minutes)
        boxes = {(frozenset(), ALL_MONTHS, ALL_DAYS, ALL_WEEKDAYS, ALL_HOURS, minutes, clock[2])}
        spec.time_zone_name, comment = "UTC", f"({timezone}{version}) as UTC{forced}"
    else:
        boxes = _merge(_utc_boxes(expr, tz, expr.fixed_hour, first, last))
        spec.time_zone_name = "UTC"
        comment = f"({timezone}{version}) as UTC until {last.isoformat()}{forced}"
    spec.calendars = [_calendar(box) for box in sorted(boxes, key=_box_order)]
    if spec.calendars:
        spec.calendars[0].comment = _comment(expr.text, comment)
    return spec


def _comment(cron: str, rest: str) -> str:
    """`30 2 * * * (America/New_York, tzdata 2026f) as UTC until 2036-12-31`, within
    Temporal's 200 characters (a long cron is shortened, never the part sync reads)."""
    room = _COMMENT_MAX - len(rest) - 1
    shown = cron if len(cron) <= room else cron[: max(room - 3, 0)] + "..."
    return f"{shown} {rest}"


def forced_utc(spec: ScheduleSpec) -> bool:
    """Whether `spec` was compiled to UTC because the server's database disagreed."""
    return bool(spec.calendars) and (spec.calendars[0].comment or "").endswith(FORCED)


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


# --- the evidence -----------------------------------------------------------------------


def change_windows(timezone: str, first: date, last: date) -> list[tuple[date, date]]:
    """Local date ranges `[a, b]` around each offset change touching `[first, last]`: the
    days the change touches and one either side, overlapping ranges merged."""
    found: list[tuple[date, date]] = []
    for change in offset_changes_between(timezone, first, last):
        low, high = change.local_dates
        window = (max(low - _ONE_DAY, first), min(high + _ONE_DAY, last))
        if window[0] > window[1]:
            continue
        if found and window[0] <= found[-1][1] + _ONE_DAY:
            found[-1] = (found[-1][0], max(found[-1][1], window[1]))
        else:
            found.append(window)
    return found


def local_midnight(day: date, timezone: str) -> datetime:
    """The instant (UTC) a local date starts at (the first valid one if midnight is in a gap)."""
    return datetime.combine(day, time(), tzinfo=zone(timezone)).astimezone(UTC)


@lru_cache(maxsize=8192)
def local_is_right(
    expr: Cron,
    timezone: str,
    start_at: datetime | None,
    end_at: datetime | None,
    first: date,
    last: date,
) -> bool:
    """Whether calendars in the job's own zone fire exactly its intended times on the local
    dates `[first, last]`, as the model of Temporal's matching evaluates them.

    Only the days around offset changes are evaluated (`change_windows`): on any other day
    a zone has one offset, every wall-clock time exists once, and the model's walk through
    the fields is plain calendar matching, which is what the intended rules say too.
    `tests/unit/test_evidence.py` checks that against whole years. Cached: a catalog
    repeats crons, and sync plans and applies with the same compilation.
    """
    windows = change_windows(timezone, first, last)
    if not windows:
        return True
    model = Model(
        ScheduleSpec(
            calendars=[
                _calendar(
                    (expr.years or frozenset(), *rule, expr.hours, expr.minutes, expr.seconds)
                )
                for rule in expr.day_rules
            ],
            time_zone_name=timezone,
            start_at=start_at,
            end_at=end_at,
        )
    )
    for a, b in windows:
        start, stop = local_midnight(a, timezone), local_midnight(b + _ONE_DAY, timezone)
        intended = cron_fires(expr, timezone, start, stop)
        if start_at is not None:
            intended = [t for t in intended if t >= start_at]
        if end_at is not None:
            intended = [t for t in intended if t <= end_at]
        if model.times(start - timedelta(seconds=1), stop - timedelta(seconds=1)) != intended:
            return False
    return True


# --- time zones -------------------------------------------------------------------------


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError(f"{moment} has no time zone; pass an aware datetime")
    return moment.astimezone(UTC)


def _changes(
    timezone: str, first: date, last: date
) -> Iterator[tuple[datetime, datetime, timedelta, timedelta]]:
    """For each offset change near [first, last]: the naive local span [low, high) that is
    skipped (spring forward) or repeated (fall back), and the offsets before and after."""
    for change in offset_changes_between(timezone, first, last):
        yield (*change.span, change.before, change.after)


def _common_minute_offset(timezone: str, first: date, last: date) -> int | None:
    """The minutes past the hour shared by every UTC offset of the window, if they agree."""
    noon = datetime.combine(first, time(12), tzinfo=zone(timezone)).utcoffset()
    offsets = {
        noon,
        *(o for *_, before, after in _changes(timezone, first, last) for o in (before, after)),
    }
    shifts = {o % timedelta(hours=1) for o in offsets if o is not None}
    if len(shifts) != 1:
        return None
    (shift,) = shifts
    return None if shift % timedelta(minutes=1) else shift // timedelta(minutes=1)


def _window(timezone: str, begin: datetime, end_at: datetime | None) -> tuple[date, date]:
    """The local dates a UTC compilation covers: whole years, from the one holding `begin`
    to `HORIZON_YEARS` later, so the spec stays the same all year long."""
    today = begin.astimezone(zone(timezone)).date()
    first, last = date(today.year, 1, 1), date(min(today.year + HORIZON_YEARS, LAST_YEAR), 12, 31)
    if end_at is not None:
        last = min(last, _utc(end_at).astimezone(zone(timezone)).date() + _ONE_DAY)
    return first, last


# --- UTC calendars ----------------------------------------------------------------------


def _utc_boxes(expr: Cron, tz: ZoneInfo, fixed: bool, first: date, last: date) -> list[Box]:
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
            for low, high, *_ in _changes(tz.key, first, last)
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
            extend(datetime.combine(start, time(12), tzinfo=tz).utcoffset(), start, stop)
        if change_day is None:
            break
        cursor = change_day + _ONE_DAY
        if not expr.matches_day(change_day):
            continue
        fires = {
            clock: instants(datetime.combine(change_day, time(*clock)), tz, fixed)
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
