"""Fire times with classic cron DST semantics, computed for any `now`, without servers,
through the one API (`timing.Timing`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from timing import Timing


def fire_times(cron, zone, start, end, *, interval=None, limit=None):
    """The fire times in `[start, end)`; with `limit`, the newest `limit`."""
    timing = Timing(cron=cron, interval=interval, timezone=zone)
    return timing.fire_times(start, end, limit=limit, newest=limit is not None)


def next_fire_time(cron, zone, after, *, interval=None):
    return Timing(cron=cron, interval=interval, timezone=zone).next_after(after)


def fixed_hour(cron: str) -> bool:
    return Timing(cron=cron).fixed_hour


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_a_fixed_time_in_the_spring_forward_gap_fires_once_at_the_end_of_the_gap():
    # 02:30 does not exist in New York on 2027-03-14; Temporal alone skips it.
    times = fire_times("30 2 * * *", "America/New_York", utc(2027, 3, 12), utc(2027, 3, 16))
    assert times == [
        utc(2027, 3, 12, 7, 30),  # 02:30 EST
        utc(2027, 3, 13, 7, 30),
        utc(2027, 3, 14, 7, 0),  # 03:00 EDT, the first valid instant after the gap
        utc(2027, 3, 15, 6, 30),  # 02:30 EDT
    ]


def test_several_times_in_the_gap_collapse_into_one_run():
    times = fire_times("0,30 2 * * *", "America/New_York", utc(2027, 3, 14), utc(2027, 3, 15))
    assert times == [utc(2027, 3, 14, 7, 0)]


def test_a_fixed_time_in_the_repeated_hour_fires_once():
    # 01:30 happens twice in New York on 2027-11-07; Temporal alone runs it twice.
    times = fire_times("30 1 * * *", "America/New_York", utc(2027, 11, 6), utc(2027, 11, 9))
    assert times == [utc(2027, 11, 6, 5, 30), utc(2027, 11, 7, 5, 30), utc(2027, 11, 8, 6, 30)]


def test_a_wildcard_hour_runs_on_real_elapsed_time_across_both_transitions():
    fall = fire_times("0 * * * *", "America/New_York", utc(2027, 11, 7), utc(2027, 11, 8))
    assert len(fall) == 24 and fall == [utc(2027, 11, 7) + timedelta(hours=h) for h in range(24)]
    spring = fire_times("0 * * * *", "America/New_York", utc(2027, 3, 14), utc(2027, 3, 15))
    assert spring == [utc(2027, 3, 14) + timedelta(hours=h) for h in range(24)]
    # The local day of the fall-back has 25 hourly runs, the spring-forward day 23.
    assert (
        len(fire_times("0 * * * *", "America/New_York", utc(2027, 11, 7, 4), utc(2027, 11, 8, 5)))
        == 25
    )
    assert (
        len(fire_times("0 * * * *", "America/New_York", utc(2027, 3, 14, 5), utc(2027, 3, 15, 4)))
        == 23
    )


def test_a_stepped_hour_is_not_fixed():
    assert fixed_hour("30 2 * * *") and fixed_hour("0 1-3 * * *") and fixed_hour("@daily")
    assert not fixed_hour("0 */2 * * *") and not fixed_hour("0 0-23/3 * * *")
    assert not fixed_hour("*/15 * * * *")


def test_limit_returns_the_newest_fire_times():
    times = fire_times("30 2 * * *", "Europe/London", None, utc(2027, 3, 29), limit=3)
    # 2027-03-28 is London's spring forward; 02:30 BST exists (the gap is 01:00-02:00).
    assert times == [utc(2027, 3, 26, 2, 30), utc(2027, 3, 27, 2, 30), utc(2027, 3, 28, 1, 30)]


def test_bounds_are_half_open():
    assert fire_times("0 * * * *", "UTC", utc(2027, 1, 1, 1), utc(2027, 1, 1, 3)) == [
        utc(2027, 1, 1, 1),
        utc(2027, 1, 1, 2),
    ]


def test_six_and_seven_fields_are_read_as_temporal_reads_them():
    # 6 fields: the sixth is a year; 7 fields: second first, year last.
    assert fire_times("0 0 1 1 * 2020", "UTC", None, utc(2027, 1, 1), limit=5) == [utc(2020, 1, 1)]
    assert next_fire_time("0 0 1 1 * 2020", "UTC", utc(2027, 1, 1)) is None
    assert next_fire_time("15 30 2 * * * *", "UTC", utc(2027, 1, 1)) == datetime(
        2027, 1, 1, 2, 30, 15, tzinfo=UTC
    )


def test_interval_fire_times_count_from_the_epoch_in_utc():
    every = timedelta(minutes=20)
    assert fire_times(
        None, "Europe/London", utc(2027, 3, 28, 0, 50), utc(2027, 3, 28, 1, 40), interval=every
    ) == [
        utc(2027, 3, 28, 1, 0),
        utc(2027, 3, 28, 1, 20),
    ]
    assert fire_times(None, "UTC", None, utc(2027, 1, 1), interval=every, limit=2) == [
        utc(2026, 12, 31, 23, 20),
        utc(2026, 12, 31, 23, 40),
    ]
    assert next_fire_time(None, "UTC", utc(2027, 1, 1), interval=every) == utc(2027, 1, 1, 0, 20)


@pytest.mark.parametrize(
    ("cron", "zone", "after", "expected"),
    [
        ("30 2 * * *", "America/New_York", utc(2027, 3, 13, 8), utc(2027, 3, 14, 7, 0)),
        # After the first 01:30 of the fall-back night, the next run is the next night's.
        ("30 1 * * *", "America/New_York", utc(2027, 11, 7, 5, 30), utc(2027, 11, 8, 6, 30)),
        ("0 * * * *", "America/New_York", utc(2027, 11, 7, 5, 0), utc(2027, 11, 7, 6, 0)),
        ("30 2 * * *", "Europe/London", utc(2027, 10, 31, 0), utc(2027, 10, 31, 2, 30)),
    ],
)
def test_next_fire_time(cron, zone, after, expected):
    assert next_fire_time(cron, zone, after) == expected


def test_a_start_or_a_limit_is_required():
    with pytest.raises(ValueError, match="without a start needs newest=True and a limit"):
        Timing(cron="0 * * * *").fire_times(None, utc(2027, 1, 1))
