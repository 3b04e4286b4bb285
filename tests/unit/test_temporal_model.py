"""The model of Temporal's calendar matching (`timing.temporal_model`) reproduces what the
1.32 server was measured to do. tests/integration/test_temporal_model.py proves it against
the server itself, zone by zone; these pin the cases the compiler's decisions turn on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from temporalio.client import (
    ScheduleCalendarSpec,
    ScheduleIntervalSpec,
    ScheduleRange,
    ScheduleSpec,
)

from timing.temporal_model import days_in_month, matching_times


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def calendar(
    hour: int | tuple[int, int], minute: int = 0, weekday: int | None = None
) -> ScheduleCalendarSpec:
    hours = ScheduleRange(*hour) if isinstance(hour, tuple) else ScheduleRange(hour)
    extra = {} if weekday is None else {"day_of_week": (ScheduleRange(weekday),)}
    return ScheduleCalendarSpec(hour=(hours,), minute=(ScheduleRange(minute),), **extra)


def times(zone: str, cal: ScheduleCalendarSpec, start: datetime, end: datetime) -> list[str]:
    spec = ScheduleSpec(calendars=[cal], time_zone_name=zone)
    return [f"{t:%m-%d %H:%M}" for t in matching_times(spec, start, end)]


def test_a_fixed_time_in_the_gap_is_skipped():
    found = times("America/New_York", calendar(2, 30), utc(2027, 3, 13), utc(2027, 3, 16))
    assert found == ["03-13 07:30", "03-15 06:30"]


def test_a_repeated_time_runs_twice_west_of_greenwich():
    found = times("America/New_York", calendar(1, 30), utc(2027, 11, 6), utc(2027, 11, 8))
    assert found == ["11-06 05:30", "11-07 05:30", "11-07 06:30"]


def test_east_of_greenwich_the_hour_before_the_repeat_runs_twice():
    found = times("Europe/London", calendar(0), utc(2027, 10, 30), utc(2027, 11, 1))
    assert found == ["10-30 23:00", "10-31 00:00", "11-01 00:00"]
    # ...and an hourly job loses the second 01:00 (01:00 GMT, 01:00Z).
    hourly = times("Europe/London", calendar((0, 23)), utc(2027, 10, 30, 22), utc(2027, 10, 31, 3))
    assert hourly == ["10-30 23:00", "10-31 00:00", "10-31 02:00", "10-31 03:00"]


def test_where_spring_forward_skips_midnight_the_weekday_is_the_day_before():
    # America/Santiago, Sunday 2027-09-05: 00:00 -04 jumps to 01:00 -03.
    sunday = times("America/Santiago", calendar(2, weekday=0), utc(2027, 8, 28), utc(2027, 9, 15))
    assert sunday == ["08-29 06:00", "09-12 05:00"]  # no run on 09-05
    saturday = times("America/Santiago", calendar(2, weekday=6), utc(2027, 8, 28), utc(2027, 9, 15))
    assert saturday == ["08-28 06:00", "09-04 06:00", "09-05 05:00", "09-11 05:00"]  # and 09-05


def test_go_resolves_a_time_in_a_half_hour_gap_past_it():
    # Australia/Lord_Howe, 2027-10-03: 02:00 +10:30 jumps to 02:30 +11 (15:30Z the day
    # before). 02:15 that day becomes 02:45 +11 (15:45Z); the intended run is at 02:30.
    found = times("Australia/Lord_Howe", calendar(2, 15), utc(2027, 10, 1), utc(2027, 10, 4))
    assert found == ["10-01 15:45", "10-02 15:45", "10-03 15:15"]


def test_start_and_end_are_inclusive_and_intervals_count_from_the_epoch():
    spec = ScheduleSpec(
        intervals=[ScheduleIntervalSpec(every=timedelta(minutes=7))],
        start_at=utc(2027, 1, 1, 0, 2),
        end_at=utc(2027, 1, 1, 0, 16),
    )
    found = matching_times(spec, utc(2027, 1, 1), utc(2027, 1, 2))
    assert found == [utc(2027, 1, 1, 0, 2), utc(2027, 1, 1, 0, 9), utc(2027, 1, 1, 0, 16)]


def test_a_calendar_matches_no_year_after_2100():
    spec = ScheduleSpec(calendars=[calendar(0)], time_zone_name="UTC")
    assert matching_times(spec, utc(2100, 12, 30), utc(2101, 1, 5)) == [utc(2100, 12, 31)]


def test_days_in_month_is_gos_including_month_13():
    assert [days_in_month(m, 2028) for m in range(1, 14)] == [
        31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31, 30,
    ]  # fmt: skip
