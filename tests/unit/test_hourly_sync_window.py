"""hourly-sync's data window: from the job's fire times, never from the clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from activities.models import ExecutionRef, JobTiming, WorkInput
from jobs.hourly_sync.activities import data_window, job_window


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
    assert data_window("0 * * * *", "UTC", scheduled_at) == window
    work = WorkInput(
        execution=ExecutionRef(execution_id=1, job_name="hourly-sync", scheduled_at=scheduled_at),
        timing=JobTiming(cron="0 * * * *", timezone="UTC"),
    )
    assert job_window(work) == window


def test_windows_follow_the_schedule_across_dst_so_they_tile_without_gaps():
    # New York, fixed 02:30: on 2027-03-14 02:30 does not exist and the run is at 03:00 EDT.
    slots = [utc(2027, 3, 13, 7, 30), utc(2027, 3, 14, 7), utc(2027, 3, 15, 6, 30)]
    windows = [data_window("30 2 * * *", "America/New_York", s) for s in slots]
    assert [w[1] for w in windows] == slots
    # 02:30 EST to 03:00 EDT, then 03:00 EDT to 02:30 EDT: 23.5 hours each, back to back.
    assert [end - start for start, end in windows[1:]] == [timedelta(hours=23, minutes=30)] * 2
    assert windows[0][1] == windows[1][0] and windows[1][1] == windows[2][0]


def test_an_interval_job_windows_on_its_interval():
    every = timedelta(minutes=15)
    assert data_window(None, "UTC", utc(2027, 1, 1, 10, 20), every) == (
        utc(2027, 1, 1, 10),
        utc(2027, 1, 1, 10, 15),
    )
