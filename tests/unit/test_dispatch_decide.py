"""The dispatcher's catch-up policy, pure: which due slots run, which are recorded skipped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from activities.dispatch import decide_slots
from timing import Timing

HOURLY = Timing(cron="0 * * * *", timezone="UTC")
T = datetime(2027, 3, 1, 12, 0, tzinfo=UTC)
H = timedelta(hours=1)


def test_on_time_the_slot_runs_scheduled_and_the_next_is_an_hour_on():
    slots = decide_slots(HOURLY, "skip", T, None, T + timedelta(seconds=5))
    assert slots.run == [(T, "scheduled")] and slots.skip == [] and slots.next_fire_at == T + H


def test_never_a_slot_before_its_time():
    slots = decide_slots(HOURLY, "latest", T, None, T - timedelta(seconds=1))
    assert slots.run == [] and slots.skip == [] and slots.next_fire_at == T


@pytest.mark.parametrize(
    ("policy", "ran", "skipped"),
    [
        ("skip", [], 4),
        ("latest", [(T + 3 * H, "catch-up")], 3),
        ("all", [(T + 2 * H, "catch-up"), (T + 3 * H, "catch-up")], 2),
    ],
)
def test_after_downtime_each_policy(policy, ran, skipped):
    now = T + 3 * H + timedelta(minutes=30)  # down since before T: four slots missed
    slots = decide_slots(HOURLY, policy, T, None, now, max_missed=2)
    assert slots.run == ran
    assert len(slots.skip) == skipped and all(r.startswith("missed") for _, r in slots.skip)
    assert slots.next_fire_at == T + 4 * H


def test_all_runs_the_on_time_slot_besides_the_missed_ones():
    slots = decide_slots(HOURLY, "all", T, None, T + 3 * H, max_missed=1)
    assert slots.run == [(T + 2 * H, "catch-up"), (T + 3 * H, "scheduled")]
    assert [s for s, _ in slots.skip] == [T, T + H]


def test_nothing_before_timing_since():
    slots = decide_slots(HOURLY, "all", T, T + 2 * H - timedelta(minutes=1), T + 2 * H, 5)
    assert slots.run == [(T + 2 * H, "scheduled")] and slots.skip == []


def test_past_end_at_no_next_slot():
    bounded = Timing(cron="0 * * * *", timezone="UTC", end_at=T + H)
    slots = decide_slots(bounded, "latest", T + H, None, T + H)
    assert slots.run == [(T + H, "scheduled")] and slots.next_fire_at is None
