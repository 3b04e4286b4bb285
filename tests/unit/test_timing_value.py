"""`timing.Timing`: the one typed answer to "when does this job fire", and the one API."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from schedules.catalog.compile import compile_schedule
from schedules.catalog.model import parse_catalog
from timing import Timing

NY = "America/New_York"


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_the_dst_rules_in_both_directions():
    nightly = Timing(cron="30 2 * * *", timezone=NY)
    assert nightly.fire_times(utc(2027, 3, 13), utc(2027, 3, 16)) == [
        utc(2027, 3, 13, 7, 30),
        utc(2027, 3, 14, 7),  # 02:30 does not exist: 03:00 EDT
        utc(2027, 3, 15, 6, 30),
    ]
    repeated = Timing(cron="30 1 * * *", timezone=NY)
    assert repeated.fire_times(utc(2027, 11, 7), utc(2027, 11, 8)) == [utc(2027, 11, 7, 5, 30)]
    hourly = Timing(cron="0 * * * *", timezone=NY)
    assert len(hourly.fire_times(utc(2027, 11, 7, 4), utc(2027, 11, 8, 5))) == 25


def test_a_30_minute_change_moves_half_an_hour():
    # Australia/Lord_Howe: 2027-10-03 02:00 +10:30 -> 02:30 +11; 2027-04-04 02:00 +11 -> 01:30.
    zone = "Australia/Lord_Howe"
    gap = Timing(cron="15 2 * * *", timezone=zone).fire_times(utc(2027, 10, 2), utc(2027, 10, 3))
    assert gap == [utc(2027, 10, 2, 15, 30)]  # at the end of the gap, 02:30 +11
    hourly = Timing(cron="0 * * * *", timezone=zone)
    short_day = (utc(2027, 10, 2, 13, 30), utc(2027, 10, 3, 13))  # local 2027-10-03: 23.5 h
    long_day = (utc(2027, 4, 3, 13), utc(2027, 4, 4, 13, 30))  # local 2027-04-04: 24.5 h
    spring, autumn = hourly.fire_times(*short_day), hourly.fire_times(*long_day)
    # Spring skips 02:00-02:29 (02:00 is gone), autumn repeats 01:30-01:59 (no whole hour).
    assert (len(spring), len(autumn)) == (23, 24)
    half = Timing(cron="*/30 * * * *", timezone=zone)
    assert (len(half.fire_times(*short_day)), len(half.fire_times(*long_day))) == (47, 49)


def test_bounds_are_the_jobs_inclusive_start_and_end():
    timing = Timing(
        cron="0 * * * *", timezone="UTC", start_at=utc(2027, 1, 1, 2), end_at=utc(2027, 1, 1, 4)
    )
    assert timing.fire_times(utc(2027, 1, 1), utc(2027, 1, 2)) == [
        utc(2027, 1, 1, 2),
        utc(2027, 1, 1, 3),
        utc(2027, 1, 1, 4),
    ]
    assert timing.next_after(utc(2026, 1, 1)) == utc(2027, 1, 1, 2)
    assert timing.next_after(utc(2027, 1, 1, 4)) is None
    assert timing.last_before(utc(2027, 1, 2)) == utc(2027, 1, 1, 4)
    assert timing.last_before(utc(2027, 1, 1, 2)) is None


def test_limit_keeps_the_oldest_or_the_newest():
    timing = Timing(cron="0 * * * *", timezone="UTC")
    start, end = utc(2027, 1, 1), utc(2027, 1, 2)
    assert timing.fire_times(start, end, limit=2) == [utc(2027, 1, 1, 0), utc(2027, 1, 1, 1)]
    assert timing.fire_times(start, end, limit=2, newest=True) == [
        utc(2027, 1, 1, 22),
        utc(2027, 1, 1, 23),
    ]
    assert timing.fire_times(None, end, limit=1, newest=True) == [utc(2027, 1, 1, 23)]
    with pytest.raises(ValueError, match="needs newest=True and a limit"):
        timing.fire_times(None, end)


def test_upcoming_and_next_after_are_strictly_after():
    timing = Timing(cron="0 9 * * 1-5", timezone=NY)
    friday = utc(2027, 1, 8, 14)
    assert timing.next_after(friday) == utc(2027, 1, 11, 14)
    assert timing.upcoming(friday, 2) == [utc(2027, 1, 11, 14), utc(2027, 1, 12, 14)]
    assert Timing(cron="0 0 1 1 * 2030", timezone="UTC").next_after(utc(2030, 1, 1)) is None


def test_intervals_count_from_the_epoch_in_utc():
    timing = Timing(interval=timedelta(minutes=7), timezone=NY)
    assert timing.fire_times(utc(2027, 1, 1), utc(2027, 1, 1, 0, 15)) == [
        utc(2027, 1, 1, 0, 2),
        utc(2027, 1, 1, 0, 9),
    ]
    assert timing.next_after(utc(2027, 1, 1, 0, 9)) == utc(2027, 1, 1, 0, 16)
    assert timing.period() == timedelta(minutes=7)


def test_it_travels_as_json_and_compares_by_value():
    timing = Timing(cron="30 2 * * *", timezone=NY, jitter=timedelta(seconds=30))
    assert Timing.model_validate_json(timing.model_dump_json()) == timing
    assert hash(timing) == hash(
        Timing(cron="30 2 * * *", timezone=NY, jitter=timedelta(30 / 86400))
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"cron": "0 0 30 2 *"}, "day-of-month '30' never fires"),
        (
            {"cron": "0 9 * * *", "timezone": "Mars/Olympus"},
            "not a known IANA time zone: 'Mars/Olympus'",
        ),
        ({"cron": "0 9 * * *", "interval": timedelta(seconds=5)}, "exactly one"),
        ({}, "exactly one"),
        ({"interval": timedelta(milliseconds=10)}, "at least 1s"),
        ({"cron": "0 9 * * *", "start_at": datetime(2027, 1, 1)}, "needs a UTC offset"),
    ],
)
def test_an_invalid_timing_says_what(fields, message):
    with pytest.raises(ValidationError, match=message):
        Timing(**fields)


def test_the_catalog_job_carries_its_timing_and_its_schedule_uses_it():
    (job,) = parse_catalog(
        {"j": {"kind": "invoice-reminders", "cron": "30 2 * * *", "timezone": NY}}
    )
    assert job.timing == Timing(cron="30 2 * * *", timezone=NY)
    now = utc(2027, 1, 1)
    assert compile_schedule(job, "q", now=now).spec == job.timing.spec(now)
    # model_copy(update=...) gets the new timing, not the old one.
    assert job.model_copy(update={"cron": "0 3 * * *"}).timing.cron == "0 3 * * *"
