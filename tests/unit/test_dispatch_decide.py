"""The dispatcher's catch-up policy, pure: which due slots run, which are recorded skipped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from activities.runtime.dispatch import decide_slots
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


def _on_nyse(on_holiday: str) -> Timing:
    from timing.business import BusinessCalendar, CalendarRule

    rule = CalendarRule(calendar=BusinessCalendar(name="NYSE", base="NYSE"), on_holiday=on_holiday)
    return Timing(cron="0 9 * * *", timezone="America/New_York", calendar=rule)


def _ny9(day: int, month: int = 10) -> datetime:
    from zoneinfo import ZoneInfo

    return datetime(2026, month, day, 9, tzinfo=ZoneInfo("America/New_York")).astimezone(UTC)


@pytest.mark.parametrize(
    ("rule", "fire", "slots", "later"),
    [
        # Saturday 31 October and Sunday 1 November 2026 are closed.
        ("preceding", _ny9(30), [_ny9(30), _ny9(31), _ny9(1, 11)], _ny9(2, 11)),
        # Saturday's would leave October: back to Friday; Sunday's forward to Monday.
        ("modified_following", _ny9(30), [_ny9(30), _ny9(31)], _ny9(2, 11)),
        ("following", _ny9(2, 11), [_ny9(31), _ny9(1, 11), _ny9(2, 11)], _ny9(3, 11)),
    ],
)
def test_a_calendar_fire_runs_its_slots_each_due_at_the_fire(rule, fire, slots, later):
    """The slots a fire time runs are decided at that fire time, under their own times,
    each moved one due at the fire (the intent's due_at), before or after its own time."""
    timing = _on_nyse(rule)
    decided = decide_slots(timing, "skip", fire, None, fire + timedelta(seconds=5))
    assert decided.run == [(slot, "scheduled") for slot in slots]
    assert decided.due == {slot: fire for slot in slots if slot != fire}
    assert decided.next_fire_at == later
