"""What the Temporal server lists for a `ScheduleSpec`: a pure model of its calendar matching.

A line-by-line port of the server's `service/worker/scheduler/calendar.go`
(`compiledCalendar.next`) and `spec.go` (`CompiledSpec.GetNextTime`, `rawNextTime`,
`nextIntervalTime`, `excluded`), server 1.32, read from temporalio/temporal. The quirks that
matter are kept on purpose, since they are what the server does:

- Local times are made with Go's `time.Date`, which resolves a local time that does not
  exist or exists twice by one fixed rule (`go_date`): a time in a spring-forward gap lands
  on one side of it, a repeated time on its later occurrence at or east of Greenwich and
  its earlier one west of it.
- The day-of-week of a candidate day is taken from `time.Date(day, current clock)`: on a day
  whose local midnight does not exist (America/Santiago, America/Havana, Atlantic/Azores
  spring forward at 00:00) that is an instant of the *previous* day, so a Sunday job does
  not fire that Sunday and a Saturday job fires on it.
- A fixed time in a gap is skipped (its `time.Date` has another hour); the hour before a
  repeated one is tried twice, an hour apart (`dstoffset`).

`matching_times(spec, after, until)` is `ListScheduleMatchingTimes` without jitter (nominal
times in `(after, until]`). It reads zones from `timing.zones`, so it is the server *with
this project's time zone database*; `tests/integration/test_temporal_model.py` proves it
equal to the real server's answers for every distinct way a zone changes its offsets in
2027-2031.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache

from temporalio.client import ScheduleCalendarSpec, ScheduleRange, ScheduleSpec

from timing.zones import Clock

MAX_YEAR = 2100  # maxCalendarYear
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_MONTH_BITS = 0b1010110101010


def _values(ranges: Sequence[ScheduleRange]) -> frozenset[int]:
    """iterateRanges: step 0 is 1, an end before the start is the start."""
    found: set[int] = set()
    for r in ranges:
        step = r.step or 1
        end = max(r.end, r.start)
        found.update(range(r.start, end + 1, step))
    return frozenset(found)


class _Calendar:
    """newCompiledCalendar: one predicate (a set) per field; an empty year list is every year."""

    __slots__ = (
        "day_of_month",
        "day_of_week",
        "hour",
        "hours",
        "minute",
        "minutes",
        "month",
        "second",
        "seconds",
        "year",
    )

    def __init__(self, cal: ScheduleCalendarSpec) -> None:
        self.year: frozenset[int] | None = _values(cal.year) if cal.year else None
        self.month = _values(cal.month)
        self.day_of_month = _values(cal.day_of_month)
        self.day_of_week = _values(cal.day_of_week)
        self.hour = _values(cal.hour)
        self.minute = _values(cal.minute)
        self.second = _values(cal.second)
        self.hours, self.minutes, self.seconds = (
            sorted(self.hour),
            sorted(self.minute),
            sorted(self.second),
        )

    def year_matches(self, year: int) -> bool:
        return self.year is None or year in self.year


def _following(values: list[int], current: int) -> int:
    """The first of the sorted `values` above `current`, or 99 when there is none."""
    i = bisect.bisect_right(values, current)
    return values[i] if i < len(values) else 99


@lru_cache(maxsize=4096)
def _month_start(year: int, month: int) -> int:
    """Days from 1970-01-01 to the first of the month."""
    return date(year, month, 1).toordinal() - _EPOCH_ORDINAL


def days_in_month(month: int, year: int) -> int:
    """daysInMonth, including what it says for month 13 (30), which `next` relies on."""
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 + ((_MONTH_BITS >> month) & 1)  # Go: & binds tighter than +


class _Zone:
    """Go's view of one location: `time.Date`, and the wall clock of an instant."""

    def __init__(self, name: str) -> None:
        self.clock = Clock(name)
        self.offset = self.clock.offset

    def go_date(self, y: int, mo: int, d: int, h: int, m: int, s: int) -> int:
        """time.Date(y, mo, d, h, m, s, 0, loc).Unix(): the local time as if UTC, corrected
        by the offset found at that guess, checked once against the offset at the result."""
        unix = (_month_start(y, mo) + d - 1) * 86400 + h * 3600 + m * 60 + s
        offset = self.offset(unix)
        if offset != 0:
            unix -= self.offset(unix - offset)
        return unix

    def wall(self, unix: int) -> tuple[int, int, int, int, int, int]:
        local = unix + self.clock.offset(unix)
        days, seconds = divmod(local, 86400)
        day = date.fromordinal(days + _EPOCH_ORDINAL)
        return day.year, day.month, day.day, seconds // 3600, seconds // 60 % 60, seconds % 60

    def hour(self, unix: int) -> int:
        return (unix + self.offset(unix)) % 86400 // 3600

    def weekday(self, unix: int) -> int:
        return ((unix + self.offset(unix)) // 86400 + 4) % 7  # 1970-01-01: Thursday


def _next(cal: _Calendar, tz: _Zone, ts: int) -> int | None:
    """compiledCalendar.next: the earliest matching second after `ts` (None: none to 2100).

    Go's `continue Outer` from an inner loop is a `break` here, after which the loop's
    own condition tells it apart from a match.
    """
    y, mo, d, h, m, s = tz.wall(ts)
    dst = 3600 if tz.hour(ts - 3600) == h else 0  # in the second copy of a repeated hour
    s += 1
    while True:
        if s >= 60:
            m, s = m + 1, 0
        if m >= 60:
            previous = tz.go_date(y, mo, d, h, 0, 0)
            h, m = h + 1, 0
            following = tz.go_date(y, mo, d, h, 0, 0)
            # Two hours later: a repeated hour was skipped over; try it again an hour on.
            if dst == 0 and following - previous > 3600:
                h, dst = h - 1, 3600
            else:
                dst = 0
        if h >= 24:
            d, h = d + 1, 0
        if d > days_in_month(mo, y):
            mo, d = mo + 1, 1
        if mo > 12:
            y, mo = y + 1, 1
        if y > MAX_YEAR:
            return None
        if not cal.year_matches(y):
            y, mo, d, h, m, s, dst = y + 1, 1, 1, 0, 0, 0, 0
            continue
        while mo not in cal.month:
            mo, d, h, m, s, dst = mo + 1, 1, 0, 0, 0, 0
            if mo > 12:
                break
        if mo > 12:
            continue
        while d not in cal.day_of_month or (
            tz.weekday(tz.go_date(y, mo, d, h, m, s)) not in cal.day_of_week
        ):
            d, h, m, s, dst = d + 1, 0, 0, 0, 0
            if d > days_in_month(mo, y):
                break
        if d > days_in_month(mo, y):
            continue
        # Go steps the clock fields up one by one until they match; jumping to the next
        # allowed value (and resetting what Go resets on the way) is the same walk.
        if h not in cal.hour:
            h, m, s, dst = _following(cal.hours, h), 0, 0, 0
            if h >= 24:
                continue
        if m not in cal.minute:
            m, s = _following(cal.minutes, m), 0
            if m >= 60:
                continue
        if s not in cal.second:
            s = _following(cal.seconds, s)
            if s >= 60:
                continue
        nominal = tz.go_date(y, mo, d, h, m, s)
        if tz.hour(nominal) != h:  # a time the clocks jumped over
            h, m, s = h + 1, 0, 0
            continue
        return nominal + dst


def _matches(cal: _Calendar, tz: _Zone, ts: int) -> bool:
    """compiledCalendar.matches (used for the spec's excludes)."""
    y, mo, d, h, m, s = tz.wall(ts)
    return (
        cal.year_matches(y)
        and mo in cal.month
        and d in cal.day_of_month
        and tz.weekday(ts) in cal.day_of_week
        and h in cal.hour
        and m in cal.minute
        and s in cal.second
    )


@lru_cache(maxsize=256)
def _zone(name: str) -> _Zone:
    return _Zone(name)


class Model:
    """A compiled spec (NewCompiledSpec), answering as the server's `GetNextTime` does."""

    def __init__(self, spec: ScheduleSpec) -> None:
        if spec.cron_expressions:
            raise ValueError("the model reads calendars and intervals, not cron strings")
        self.zone = _zone(spec.time_zone_name or "UTC")
        self.calendars = [_Calendar(c) for c in spec.calendars]
        self.excludes = [_Calendar(c) for c in spec.skip]
        self.intervals = [
            (int(i.every.total_seconds()), int((i.offset or timedelta(0)).total_seconds()))
            for i in spec.intervals
        ]
        self.start = int(spec.start_at.timestamp()) if spec.start_at else 0
        self.end = int(spec.end_at.timestamp()) if spec.end_at else None

    def _raw_next(self, after: int) -> int | None:
        """rawNextTime: the earliest of every calendar's and interval's next time."""
        best: int | None = None
        for cal in self.calendars:
            found = _next(cal, self.zone, after)
            if found is not None and (best is None or found < best):
                best = found
        for every, phase in self.intervals:
            every = max(every, 1)
            found = ((after - phase) // every + 1) * every + phase
            if best is None or found < best:
                best = found
        return best

    def _past_end(self, unix: int) -> bool:
        return (self.end is not None and unix > self.end) or (
            datetime.fromtimestamp(unix, UTC).year > MAX_YEAR
        )

    def next_time(self, after: int) -> int | None:
        """GetNextTime's nominal time (no jitter) after `after` (unix seconds)."""
        after = max(after, self.start - 1)
        nominal: int | None = None
        while nominal is None or any(_matches(c, self.zone, nominal) for c in self.excludes):
            nominal = self._raw_next(after)
            if nominal is None or self._past_end(nominal):
                return None
            after = nominal
        return nominal

    def times(self, after: datetime, until: datetime, limit: int | None = None) -> list[datetime]:
        """The nominal times in `(after, until]`, oldest first (at most `limit`)."""
        found: list[datetime] = []
        current, stop = int(after.timestamp()), until.timestamp()
        while limit is None or len(found) < limit:
            nominal = self.next_time(current)
            if nominal is None or nominal > stop:
                break
            found.append(datetime.fromtimestamp(nominal, UTC))
            current = nominal
        return found


def matching_times(
    spec: ScheduleSpec, after: datetime, until: datetime, limit: int | None = None
) -> list[datetime]:
    """The nominal times in `(after, until]` the server lists for `spec`, oldest first.

    As `ListScheduleMatchingTimes` for a schedule without jitter (the server stops at 1,000
    per call; `limit` None here means no limit).
    """
    return Model(spec).times(after, until, limit)
