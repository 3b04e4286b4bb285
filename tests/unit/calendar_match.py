"""Plain calendar matching in UTC, for tests: a spec in UTC has no DST, so this is exact."""

from __future__ import annotations

from datetime import datetime, time, timedelta

from temporalio.client import ScheduleRange, ScheduleSpec


def _values(ranges: tuple[ScheduleRange, ...]) -> set[int]:
    return {v for r in ranges for v in range(r.start, max(r.end, r.start) + 1, r.step or 1)}


def utc_matching_times(spec: ScheduleSpec, start: datetime, end: datetime) -> list[datetime]:
    """The times in [start, end) a spec in UTC matches."""
    assert spec.time_zone_name == "UTC"
    found = set()
    for cal in spec.calendars:
        years, months, days = _values(cal.year), _values(cal.month), _values(cal.day_of_month)
        weekdays = _values(cal.day_of_week)
        clocks = [
            time(h, m, s)
            for h in _values(cal.hour)
            for m in _values(cal.minute)
            for s in _values(cal.second)
        ]
        day = start.date()
        while day <= end.date():
            if (
                (not years or day.year in years)
                and day.month in months
                and day.day in days
                and day.isoweekday() % 7 in weekdays
            ):
                found.update(datetime.combine(day, c, tzinfo=start.tzinfo) for c in clocks)
            day += timedelta(days=1)
    return sorted(t for t in found if start <= t < end)
