"""hourly-sync's data window: from the job's fire times, never from the clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from activities.common.models import ExecutionRef, WorkInput
from jobs.hourly_sync.activities import data_window, job_window
from timing import Timing


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(
    ("scheduled_at", "window"),
    [
        # On a fire time: the hour before it.
        (utc(2027, 1, 1, 10), (utc(2027, 1, 1, 9), utc(2027, 1, 1, 10))),
        # Midnight: the window crosses the day (and here the year).
        (utc(2027, 1, 1, 0), (utc(2026, 12, 31, 23), utc(2027, 1, 1, 0))),
        # A manual trigger between fire times: the last whole window before it.
        (utc(2027, 1, 1, 10, 17, 23), (utc(2027, 1, 1, 9), utc(2027, 1, 1, 10))),
    ],
)
def test_the_window_ends_at_the_slot_and_starts_at_the_fire_time_before(scheduled_at, window):
    hourly = Timing(cron="0 * * * *")
    assert data_window(hourly, scheduled_at) == window
    execution = ExecutionRef(execution_id=1, job_name="hourly-sync", scheduled_at=scheduled_at)
    assert job_window(WorkInput(execution=execution, timing=hourly)) == window


def test_a_job_that_starts_later_still_has_a_first_window():
    timing = Timing(cron="0 * * * *", start_at=utc(2027, 1, 1, 10))
    assert data_window(timing, utc(2027, 1, 1, 10)) == (utc(2027, 1, 1, 9), utc(2027, 1, 1, 10))


def test_windows_follow_the_schedule_across_dst_so_they_tile_without_gaps():
    # New York, fixed 02:30: on 2027-03-14 02:30 does not exist and the run is at 03:00 EDT.
    slots = [utc(2027, 3, 13, 7, 30), utc(2027, 3, 14, 7), utc(2027, 3, 15, 6, 30)]
    timing = Timing(cron="30 2 * * *", timezone="America/New_York")
    windows = [data_window(timing, s) for s in slots]
    assert [w[1] for w in windows] == slots
    # 02:30 EST to 03:00 EDT, then 03:00 EDT to 02:30 EDT: 23.5 hours each, back to back.
    assert [end - start for start, end in windows[1:]] == [timedelta(hours=23, minutes=30)] * 2
    assert windows[0][1] == windows[1][0] and windows[1][1] == windows[2][0]


def test_an_interval_job_windows_on_its_interval():
    every = timedelta(minutes=15)
    assert data_window(Timing(interval=every), utc(2027, 1, 1, 10, 20)) == (
        utc(2027, 1, 1, 10),
        utc(2027, 1, 1, 10, 15),
    )
