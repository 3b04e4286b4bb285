"""Cron + time zone -> ScheduleSpec, DST-exact, checked without servers for any `now`.

UTC-compiled specs are evaluated here by plain calendar matching (UTC has no DST) and
compared with `timing.firetimes` over their whole horizon. Which form a job gets is decided
by evidence (the model of Temporal's matching, `timing.temporal_model`); tests/unit/
test_evidence.py checks those decisions over whole years, and tests/integration/
test_every_zone.py checks the compiled specs on the real server.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

import pytest
from temporalio.client import ScheduleCalendarSpec, ScheduleRange, ScheduleSpec

from schedules.catalog.compile import compile_schedule
from schedules.catalog.model import parse_catalog
from tests.unit.calendar_match import utc_matching_times as matching_times
from timing import Timing
from timing.calendars import HORIZON_YEARS, compiled_until, describe_spec, spec_outdated
from timing.cron import CronError, parse_cron
from timing.zones import TZDATA_VERSION

NOW = datetime(2026, 11, 29, 16, 30, tzinfo=UTC)
NY, LONDON = "America/New_York", "Europe/London"


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def compile_spec(cron: str, zone: str, *, now: datetime, **bounds) -> ScheduleSpec:
    """The job's spec through the one API (`Timing.spec`)."""
    return Timing(cron=cron, timezone=zone, **bounds).spec(now)


def fire_times(cron: str, zone: str, start: datetime, end: datetime) -> list[datetime]:
    return Timing(cron=cron, timezone=zone).fire_times(start, end)


def next_fire_times(cron: str, zone: str, after: datetime, count: int, **bounds) -> list[datetime]:
    return Timing(cron=cron, timezone=zone, **bounds).upcoming(after, count)


def until_instant(spec: ScheduleSpec) -> datetime:
    until = compiled_until(spec)
    assert until is not None
    return datetime.combine(until, time(), tzinfo=UTC) - timedelta(days=1)


# --- the semantics ----------------------------------------------------------------------


def test_a_fixed_time_in_the_new_york_gap_runs_once_at_the_end_of_the_gap():
    assert next_fire_times("30 2 * * *", NY, utc(2027, 3, 12), 4) == [
        utc(2027, 3, 12, 7, 30),  # 02:30 EST
        utc(2027, 3, 13, 7, 30),
        utc(2027, 3, 14, 7, 0),  # 02:30 does not exist: 03:00 EDT
        utc(2027, 3, 15, 6, 30),  # 02:30 EDT
    ]


def test_a_fixed_time_in_the_new_york_repeated_hour_runs_once_at_the_first():
    assert next_fire_times("30 1 * * *", NY, utc(2027, 11, 6), 3) == [
        utc(2027, 11, 6, 5, 30),
        utc(2027, 11, 7, 5, 30),  # 01:30 EDT; not 06:30Z (01:30 EST) as well
        utc(2027, 11, 8, 6, 30),
    ]


def test_london_gap_and_repeated_hour_for_a_fixed_time():
    # London skips 01:00-02:00 on 2027-03-28 and repeats 01:00-02:00 on 2027-10-31.
    assert next_fire_times("30 1 * * *", LONDON, utc(2027, 3, 27), 2) == [
        utc(2027, 3, 27, 1, 30),
        utc(2027, 3, 28, 1, 0),  # 02:00 BST, the first instant after the gap
    ]
    assert next_fire_times("30 1 * * *", LONDON, utc(2027, 10, 30), 3) == [
        utc(2027, 10, 30, 0, 30),
        utc(2027, 10, 31, 0, 30),  # 01:30 BST only
        utc(2027, 11, 1, 1, 30),
    ]


def test_a_list_of_fixed_hours_keeps_each_wall_clock_time_once():
    # 01:00 and 02:00 fall in New York's gap: both become 03:00 EDT, with 03:00 itself once.
    day = next_fire_times("0 1-3 * * *", NY, utc(2027, 3, 14, 4), 3)
    assert day == [utc(2027, 3, 14, 6, 0), utc(2027, 3, 14, 7, 0), utc(2027, 3, 15, 5, 0)]
    fall = next_fire_times("0 1-3 * * *", NY, utc(2027, 11, 7, 4), 3)
    assert fall == [utc(2027, 11, 7, 5), utc(2027, 11, 7, 7), utc(2027, 11, 7, 8)]


@pytest.mark.parametrize(
    ("zone", "short_day", "long_day"),
    [(NY, date(2027, 3, 14), date(2027, 11, 7)), (LONDON, date(2027, 3, 28), date(2027, 10, 31))],
)
def test_a_wildcard_hour_follows_elapsed_time(zone, short_day, long_day):
    def runs_on(day: date) -> int:
        from zoneinfo import ZoneInfo

        tz = ZoneInfo(zone)
        start = datetime.combine(day, time(), tzinfo=tz).astimezone(UTC)
        end = datetime.combine(day + timedelta(days=1), time(), tzinfo=tz).astimezone(UTC)
        return len(fire_times("0 * * * *", zone, start, end))

    assert (runs_on(short_day), runs_on(long_day)) == (23, 25)


def test_years_ahead_the_clock_is_a_parameter():
    # 2035-03-11 is New York's spring forward; 2035-11-04 its fall back.
    assert next_fire_times("30 2 * * *", NY, utc(2035, 3, 10, 8), 2) == [
        utc(2035, 3, 11, 7, 0),
        utc(2035, 3, 12, 6, 30),
    ]
    assert next_fire_times("30 1 * * *", NY, utc(2035, 11, 4), 2) == [
        utc(2035, 11, 4, 5, 30),
        utc(2035, 11, 5, 6, 30),
    ]


def test_next_fire_times_respects_start_and_end():
    times = next_fire_times(
        "0 9 * * *",
        "UTC",
        utc(2027, 1, 1),
        5,
        start_at=utc(2027, 1, 3, 9),
        end_at=utc(2027, 1, 5, 9),
    )
    assert times == [utc(2027, 1, 3, 9), utc(2027, 1, 4, 9), utc(2027, 1, 5, 9)]


def test_fixed_time_is_the_hour_field_named_outright():
    fixed = [Timing(cron=c).fixed_hour for c in ("30 2 * * *", "0 9,17 * * 1-5")]
    wildcard = [Timing(cron=c).fixed_hour for c in ("0 * * * *", "0 0-23/3 * * *")]
    assert fixed == [True, True] and wildcard == [False, False]


# --- which compilation ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cron", "zone", "compiled_zone", "horizon"),
    [
        ("30 2 * * *", NY, "UTC", True),  # the gap
        ("30 1 * * *", NY, "UTC", True),  # the repeated hour
        ("30 1 * * *", LONDON, "UTC", True),  # both
        ("0 0 * * *", LONDON, "UTC", True),  # Temporal replays the hour before London's repeat
        ("30 2 * * *", LONDON, LONDON, False),  # never meets a change
        ("0 9,17 * * 1-5", NY, NY, False),
        ("30 2 * * 1-5", NY, NY, False),  # New York changes on Sundays
        # Every hour of every day is the same minutes of every UTC hour: one UTC calendar.
        ("0 * * * *", NY, "UTC", False),
        ("*/5 * * * *", LONDON, "UTC", False),
        ("0 * * * *", "Asia/Tokyo", "Asia/Tokyo", False),  # no change: the zone's own
        ("0 */2 * * *", LONDON, "UTC", True),
        ("30 2 * * *", "UTC", "UTC", False),
        ("30 2 * * *", "Asia/Tokyo", "Asia/Tokyo", False),
        # Spring forward skips local midnight: Temporal takes Sunday's weekday from Saturday.
        ("0 2 * * 0", "America/Santiago", "UTC", True),
        ("0 2 * * 6", "America/Santiago", "UTC", True),
        ("0 9 * * *", "America/Santiago", "America/Santiago", False),  # every day: no weekday
        ("0 12 * * 0", "America/Havana", "UTC", True),
        ("0 12 * * 1-5", "America/Havana", "America/Havana", False),  # never on a Sunday
        ("0 2 * * 0", "Australia/Lord_Howe", "Australia/Lord_Howe", False),  # 02:00 exists
        ("30 2 * * *", "Australia/Lord_Howe", "Australia/Lord_Howe", False),  # so does 02:30
        # 02:15 does not: Go's time.Date makes it 02:45, the intended run is at 02:30.
        ("15 2 * * *", "Australia/Lord_Howe", "UTC", True),
    ],
)
def test_compilation_keeps_the_local_zone_where_temporal_is_right(
    cron, zone, compiled_zone, horizon
):
    spec = compile_spec(cron, zone, now=NOW)
    assert spec.time_zone_name == compiled_zone
    assert (compiled_until(spec) is not None) == horizon


def test_a_local_compilation_is_the_cron_as_calendars():
    spec = compile_spec("0 9,17 * * 1-5", NY, now=NOW)
    assert spec.calendars == [
        ScheduleCalendarSpec(
            second=(ScheduleRange(0),),
            minute=(ScheduleRange(0),),
            hour=(ScheduleRange(9), ScheduleRange(17)),
            day_of_month=(ScheduleRange(1, 31),),
            month=(ScheduleRange(1, 12),),
            year=(),
            day_of_week=(ScheduleRange(1, 5),),
            comment=f"0 9,17 * * 1-5 ({NY}, tzdata {TZDATA_VERSION})",
        )
    ]


def test_day_of_month_or_day_of_week_is_two_calendars_as_in_classic_cron():
    # Temporal's calendars need both fields to match; cron (and firetimes) needs either.
    spec = compile_spec("0 9 1 * 1", "UTC", now=NOW)
    start, end = utc(2027, 2, 1), utc(2027, 3, 2)
    assert matching_times(spec, start, end) == fire_times("0 9 1 * 1", "UTC", start, end)
    assert len(spec.calendars) == 2


def test_a_year_field_is_kept():
    spec = compile_spec("0 0 1 1 * 2030", "UTC", now=NOW)
    assert [c.year for c in spec.calendars] == [(ScheduleRange(2030),)]


@pytest.mark.parametrize("cron", ["0 9 L * *", "0 9 * * 5#2", "H 9 * * *", "61 2 * * *"])
def test_cron_syntax_temporal_cannot_express_is_refused_by_name(cron):
    with pytest.raises(CronError, match=repr(cron).replace("*", r"\*")):
        parse_cron(cron)


# --- UTC compilations match firetimes over their whole horizon ----------------------------


@pytest.mark.parametrize(
    ("cron", "zone"),
    [
        ("30 2 * * *", NY),
        ("30 1 * * *", NY),
        ("30 1 * * *", LONDON),
        ("0 0 * * *", LONDON),
        ("0,30 1,2 * * *", NY),
        ("15 1-3 * * *", NY),
        ("30 1,22 * * 0", NY),  # weekly; 22:30 on Sunday is Monday in UTC
        ("30 2 1,15 * *", "Australia/Sydney"),  # a day earlier in UTC: explicit dates
        ("30 2 1 * 1", "Australia/Sydney"),  # the 1st or a Monday, a day earlier in UTC
        ("15 2 * * 0", "Australia/Lord_Howe"),  # in the half-hour gap
        ("0 0 * * *", "America/Santiago"),  # changes at midnight
        ("0 2 * * 0", "America/Santiago"),  # the case: a Sunday at 02:00
    ],
)
def test_utc_compilation_matches_firetimes_to_the_horizon(cron, zone):
    spec = compile_spec(cron, zone, now=NOW)
    assert spec.time_zone_name == "UTC"
    end = until_instant(spec)
    assert end.year == NOW.year + HORIZON_YEARS
    assert matching_times(spec, NOW, end) == fire_times(cron, zone, NOW, end)
    assert len(spec.calendars) <= 10 * (HORIZON_YEARS + 1)  # bounded per year


@pytest.mark.parametrize(
    ("cron", "zone", "start", "end"),
    [
        ("0 */2 * * *", LONDON, utc(2027, 1, 1), utc(2028, 12, 31)),
        ("15 * * * 0", LONDON, utc(2027, 1, 1), utc(2027, 12, 31)),
        ("*/5 * * * *", LONDON, utc(2027, 10, 20), utc(2027, 11, 10)),
        ("0 * * * *", "Australia/Lord_Howe", utc(2027, 3, 25), utc(2027, 4, 10)),
    ],
)
def test_utc_compilation_of_elapsed_time_jobs_matches_firetimes(cron, zone, start, end):
    spec = compile_spec(cron, zone, now=NOW)
    assert matching_times(spec, start, end) == fire_times(cron, zone, start, end)


def test_weekly_job_crossing_midnight_utc_moves_its_weekday():
    spec = compile_spec("30 1,22 * * 0", NY, now=NOW)
    sunday_evening = next_fire_times("30 1,22 * * 0", NY, utc(2027, 7, 4, 12), 1)
    assert sunday_evening == [utc(2027, 7, 5, 2, 30)]  # Monday in UTC
    assert matching_times(spec, utc(2027, 7, 4, 12), utc(2027, 7, 6)) == sunday_evening


# --- horizon ------------------------------------------------------------------------------


def test_horizon_runs_to_the_end_of_the_tenth_year_and_starts_where_start_at_does():
    assert compiled_until(compile_spec("30 2 * * *", NY, now=NOW)) == date(2036, 12, 31)
    later = compile_spec("30 2 * * *", NY, start_at=utc(2030, 6, 1), now=NOW)
    assert compiled_until(later) == date(2040, 12, 31)
    assert later.start_at == utc(2030, 6, 1)
    ends = compile_spec("30 2 * * *", NY, end_at=utc(2028, 6, 1), now=NOW)
    assert compiled_until(ends) == date(2028, 6, 1) and ends.end_at == utc(2028, 6, 1)
    # Past the horizon a UTC-compiled spec matches nothing: a sync must extend it first.
    spec = compile_spec("30 2 * * *", NY, now=NOW)
    assert matching_times(spec, utc(2037, 1, 2), utc(2037, 3, 1)) == []


def test_the_horizon_starts_on_1_january_of_the_clocks_year_in_the_jobs_own_zone():
    # New Year in New York is 05:00Z: until then its year is the old one, and so is the spec.
    before = compile_spec("0 2 * * *", NY, now=utc(2027, 1, 1, 4, 59))
    after = compile_spec("0 2 * * *", NY, now=utc(2027, 1, 1, 5))
    assert compiled_until(before) == date(2036, 12, 31)
    assert compiled_until(after) == date(2037, 12, 31)
    # Nothing of the years before the clock's: Temporal's backfill of such a night (what
    # tests/integration/test_reconcile.py does) fires nothing unless synced as of its year.
    night = utc(2026, 11, 2, 7)  # 02:00 EST
    assert matching_times(before, night, night + timedelta(seconds=1)) == [night]
    assert matching_times(after, night, night + timedelta(seconds=1)) == []


def test_the_spec_is_the_same_all_year_long_and_recompiled_the_next():
    a = compile_spec("30 2 * * *", NY, now=utc(2027, 1, 1, 5))
    b = compile_spec("30 2 * * *", NY, now=utc(2027, 12, 31, 12))
    c = compile_spec("30 2 * * *", NY, now=utc(2028, 1, 1, 5))
    assert a == b and compiled_until(c) == date(2038, 12, 31)
    assert not spec_outdated(b, a) and spec_outdated(a, c)
    assert describe_spec(c) == f"{len(c.calendars)} calendars in UTC until 2038-12-31"
    local = compile_spec("30 2 * * *", LONDON, now=NOW)
    assert describe_spec(local) == "1 calendar in Europe/London"
    # A schedule from before this compiler (a plain cron string) is outdated.
    old = ScheduleSpec(cron_expressions=["30 2 * * *"], time_zone_name=LONDON)
    assert spec_outdated(old, local)


def test_jitter_start_and_end_pass_through():
    spec = compile_spec(
        "30 2 * * *",
        NY,
        start_at=utc(2027, 1, 1),
        end_at=utc(2027, 12, 31),
        jitter=timedelta(minutes=5),
        now=NOW,
    )
    assert (spec.start_at, spec.end_at, spec.jitter) == (
        utc(2027, 1, 1),
        utc(2027, 12, 31),
        timedelta(minutes=5),
    )
    assert compile_spec("30 2 * * *", NY, now=NOW).jitter is None


def test_compile_schedule_uses_the_dst_exact_spec():
    (job,) = parse_catalog(
        {"nightly": {"kind": "invoice-reminders", "cron": "30 2 * * *", "timezone": NY}}
    )
    spec = compile_schedule(job, "q", now=NOW).spec
    assert spec == compile_spec("30 2 * * *", NY, now=NOW)
    (every,) = parse_catalog(
        {"often": {"kind": "invoice-reminders", "interval": "15m", "timezone": NY}}
    )
    assert compile_schedule(every, "q", now=NOW).spec.intervals[0].every == timedelta(minutes=15)
