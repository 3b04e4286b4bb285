"""The one cron grammar (`timing.cron`): what each form means, and every refusal naming its
field and value. The same function validates the catalog, computes fire times and
compiles calendars, so these are the rules of all of them."""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime, timedelta

import pytest

from core.errors import CatalogError
from schedules.catalog.model import parse_catalog
from tests.cron_table import MALFORMED
from timing import Timing
from timing.cron import ALL_DAYS, ALL_WEEKDAYS, CronError, parse_cron


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(("cron", "field", "value"), MALFORMED)
def test_a_malformed_cron_is_refused_naming_its_field_and_value(cron, field, value):
    with pytest.raises(CronError) as caught:
        parse_cron(cron)
    error = caught.value
    assert (error.field, error.value) == (field, value)
    assert f"cron {cron!r}" in str(error)
    if field != "cron":
        assert f"{field} {value!r}" in str(error)


def test_the_table_covers_at_least_25_malformed_crons():
    assert len(MALFORMED) >= 25
    assert len({cron for cron, _, _ in MALFORMED}) == len(MALFORMED)


@pytest.mark.parametrize(("cron", "field", "value"), MALFORMED)
def test_the_catalog_refuses_the_same_with_job_field_and_value_on_one_line(cron, field, value):
    with pytest.raises(CatalogError) as caught:
        parse_catalog({"bad-job": {"kind": "invoice-reminders", "cron": cron, "timezone": "UTC"}})
    (line,) = [line for line in str(caught.value).splitlines() if "bad-job" in line]
    assert line.strip().startswith("job 'bad-job': cron: ")
    assert field in line and repr(value) in line


@pytest.mark.parametrize(
    ("alias", "cron"),
    [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
        ("@DAILY", "0 0 * * *"),
    ],
)
def test_aliases_are_temporals(alias, cron):
    a, b = parse_cron(alias), parse_cron(cron)
    assert (a.times, a.days, a.months, a.weekdays, a.fixed_hour) == (
        b.times,
        b.days,
        b.months,
        b.weekdays,
        b.fixed_hour,
    )


def test_six_fields_end_with_a_year_and_seven_start_with_a_second():
    six = parse_cron("30 2 * * * 2028")
    assert six.years == {2028} and six.times == ((2, 30, 0),)
    seven = parse_cron("15 30 2 * * * 2028-2029")
    assert seven.years == {2028, 2029} and seven.times == ((2, 30, 15),)
    assert Timing(cron="30 2 * * * 2028", timezone="UTC").upcoming(utc(2026, 12, 1), 1) == [
        utc(2028, 1, 1, 2, 30)
    ]


def test_values_ranges_steps_lists_and_names():
    cron = parse_cron("*/20 1-3,5 1/10 jan-mar,DEC mon-fri/2")
    assert cron.minutes == {0, 20, 40}
    assert cron.hours == {1, 2, 3, 5}
    assert cron.days == {1, 11, 21, 31}
    assert cron.months == {1, 2, 3, 12}
    assert cron.weekdays == {1, 3, 5}
    assert parse_cron("0 0 * * 7").weekdays == {0}  # 7 is Sunday too
    assert parse_cron("0 0 * * 5-7").weekdays == {0, 5, 6}


def test_day_of_month_or_day_of_week_when_both_are_restricted():
    both = parse_cron("0 9 1 * 1")
    assert both.days_or_weekdays
    assert both.matches_day(date(2027, 2, 1)) and both.matches_day(date(2027, 2, 8))  # Monday
    assert not both.matches_day(date(2027, 2, 2))
    only_days = parse_cron("0 9 1 * *")
    assert not only_days.days_or_weekdays and only_days.weekdays == ALL_WEEKDAYS
    only_weekdays = parse_cron("0 9 * * 1")
    assert not only_weekdays.days_or_weekdays and only_weekdays.days == ALL_DAYS
    # Anything but `*` restricts, even a field that lists every value.
    assert parse_cron("0 9 */1 * 1").days_or_weekdays


def test_fixed_hour_is_the_hour_field_named_outright():
    assert parse_cron("30 2 * * *").fixed_hour and parse_cron("0 1-3 * * *").fixed_hour
    assert not parse_cron("0 * * * *").fixed_hour and not parse_cron("0 */2 * * *").fixed_hour
    assert not parse_cron("@hourly").fixed_hour and parse_cron("@daily").fixed_hour


def test_feb_29_is_a_date_that_comes_in_leap_years():
    assert Timing(cron="0 0 29 2 *", timezone="UTC").upcoming(utc(2026, 12, 1), 2) == [
        utc(2028, 2, 29),
        utc(2032, 2, 29),
    ]
    with pytest.raises(CronError, match="February 2027 has 28 days"):
        parse_cron("0 0 29 2 * 2027")


@pytest.mark.parametrize(
    "text",
    [
        "0 9 * * 1",
        "30 23 * * 1",  # the same days as the one above, other times: a cache must not mix them
        "59 23 * * 1,2",
        "0 0,12 * * 0",
        "15 6 31 * *",
        "0 9 1,15 * 1",  # day of month or weekday
        "0 22 * 2 *",
        "0 1 1 1,7 *",
    ],
)
def test_the_shortest_gap_matches_consecutive_fire_times(text):
    cron = parse_cron(text)
    start = datetime(2001, 1, 1)
    fires = [
        start + timedelta(days=offset, hours=h, minutes=m, seconds=s)
        for offset in range(800)
        if cron.matches_day((start + timedelta(days=offset)).date())
        for h, m, s in cron.times
    ]
    assert cron.shortest_gap() == min(b - a for a, b in itertools.pairwise(fires))


def test_the_shortest_gap_is_read_from_the_fields():
    assert parse_cron("*/15 * * * *").shortest_gap() == timedelta(minutes=15)
    assert parse_cron("0 9 * * *").shortest_gap() == timedelta(days=1)
    assert parse_cron("0 9 * * 1").shortest_gap() == timedelta(days=7)
    assert parse_cron("0 9,17 * * 1-5").shortest_gap() == timedelta(hours=8)
    assert parse_cron("0 23 * * 1 2030").shortest_gap() == timedelta(days=7)
