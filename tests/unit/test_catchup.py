"""Catch-up policy and the repeated-hour rule, as pure decisions with times as parameters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from activities.catchup.missed import (
    Decision,
    PlanInput,
    decide,
    repeated_hour_reason,
    run_origin,
    second_occurrence_of,
    slot_origin,
)
from timing import Timing

T0 = datetime(2027, 1, 1, 12, 0, tzinfo=UTC)
EVERY = timedelta(minutes=5)
MISSED = [T0 + i * EVERY for i in range(5)]


def plan(timing: Timing | None = None, **fields) -> PlanInput:
    base = {
        "job_name": "j",
        "scheduled_at": T0,
        "started_at": T0,
        "workflow_id": "w",
        "run_id": "r",
        "timing": timing or Timing(interval=EVERY),
    }
    return PlanInput(**(base | fields))


def test_nothing_missed_runs_the_slot():
    decision = decide(T0, T0, [T0], plan())
    assert decision.run == [T0] and decision.skip == []


def test_skip_runs_none_of_the_missed():
    late_start = MISSED[-1] + timedelta(minutes=1)
    decision = decide(T0, late_start, MISSED, plan(catchup="skip"))
    assert decision.run == []
    assert [s for s, _ in decision.skip] == MISSED
    assert all("policy 'skip'" in reason for _, reason in decision.skip)


def test_skip_still_runs_an_on_time_latest_slot():
    decision = decide(MISSED[-1], MISSED[-1] + timedelta(seconds=2), MISSED, plan(catchup="skip"))
    assert decision.run == [MISSED[-1]]
    assert len(decision.skip) == 4


def test_latest_runs_only_the_most_recent():
    decision = decide(T0, MISSED[-1], MISSED, plan(catchup="latest"))
    assert decision.run == [MISSED[-1]]
    assert [s for s, _ in decision.skip] == MISSED[:-1]


def test_all_runs_the_newest_n_oldest_first_and_records_the_gap():
    decision = decide(T0, MISSED[-1], MISSED, plan(catchup="all", max_missed=2))
    assert decision.run == MISSED[-2:]
    assert decision.gap == 3
    assert all(reason.startswith("catch-up gap: 3 missed") for _, reason in decision.skip)


def test_all_late_earliest_slot_is_one_of_the_missed():
    """After downtime Temporal starts the earliest missed time, late: it is one of the
    missed, so it runs only if it is among the newest N, and is a recorded gap otherwise."""
    restarted = MISSED[-1] + timedelta(seconds=3)
    decision = decide(MISSED[0], restarted, MISSED, plan(catchup="all", max_missed=2))
    assert decision.run == MISSED[-2:]
    assert [s for s, _ in decision.skip] == MISSED[:3] and decision.gap == 3


def test_all_on_time_run_catches_up_n_missed_besides_its_own_slot():
    """Temporal started nothing during the downtime; the next on-time fire catches up: the
    N newest missed times, and its own slot, which was not missed."""
    own = MISSED[-1] + EVERY
    decision = decide(
        own, own + timedelta(seconds=1), [*MISSED, own], plan(catchup="all", max_missed=2)
    )
    assert decision.run == [*MISSED[-2:], own]
    assert [s for s, _ in decision.skip] == MISSED[:3] and decision.gap == 3
    assert all(reason.startswith("catch-up gap: 3 missed") for _, reason in decision.skip)


def test_all_runs_the_same_missed_times_whichever_slot_temporal_started():
    cap = plan(catchup="all", max_missed=3)
    late = decide(MISSED[0], MISSED[-1] + timedelta(seconds=3), MISSED, cap)
    own = MISSED[-1] + EVERY
    on_time = decide(own, own, [*MISSED, own], cap)
    assert late.run == [s for s in on_time.run if s != own] == MISSED[-3:]
    assert [s for s, _ in late.skip] == [s for s, _ in on_time.skip] == MISSED[:2]
    assert late.gap == on_time.gap == 2


def test_all_counts_a_late_newest_slot_as_missed():
    """The newest slot started past ON_TIME was missed too: it counts against the cap."""
    late = MISSED[-1] + timedelta(minutes=2)
    decision = decide(MISSED[-1], late, MISSED, plan(catchup="all", max_missed=2))
    assert decision.run == MISSED[-2:] and decision.gap == 3


def test_all_with_fewer_missed_than_the_cap_runs_them_all():
    decision = decide(T0, MISSED[-1], MISSED, plan(catchup="all", max_missed=10))
    assert decision.run == MISSED and decision.gap == 0 and decision.skip == []


def test_the_second_0130_of_a_fall_back_night_is_recognised():
    first = datetime(2027, 11, 7, 5, 30, tzinfo=UTC)  # 01:30 EDT
    second = datetime(2027, 11, 7, 6, 30, tzinfo=UTC)  # 01:30 EST
    assert second_occurrence_of(second, "America/New_York") == first
    assert second_occurrence_of(first, "America/New_York") is None
    assert second_occurrence_of(second, "UTC") is None

    fixed = plan(Timing(cron="30 1 * * *", timezone="America/New_York"))
    reason = repeated_hour_reason(second, {first}, fixed)
    assert reason == (
        "repeated local time 01:30 America/New_York (fall back): "
        "the job already ran at 2027-11-07T05:30:00Z"
    )
    assert repeated_hour_reason(second, set(), fixed) is None  # the first one never ran
    hourly = plan(Timing(cron="30 * * * *", timezone="America/New_York"))
    assert repeated_hour_reason(second, {first}, hourly) is None  # elapsed-time job: runs


def test_the_run_origin_is_the_decisions_unless_it_catches_up():
    on_time = Decision([T0], [], 0)
    assert run_origin(on_time, T0) == "scheduled"
    assert run_origin(Decision([T0], [], 0, "manual"), T0) == "manual"
    assert run_origin(Decision([T0], [], 0, "backfill"), T0) == "backfill"
    # Anything missed, run or skipped, makes the run a catch-up; its own slot too.
    assert run_origin(Decision(MISSED[:2], [], 0), MISSED[1]) == "catch-up"
    assert run_origin(Decision([], [(T0, "missed")], 0), T0) == "catch-up"


def test_every_slot_but_the_runs_own_is_a_catch_up():
    assert slot_origin(T0, T0, "manual") == "manual"
    assert slot_origin(T0 - EVERY, T0, "scheduled") == "catch-up"
    assert slot_origin(T0, T0, "direct") == "direct"
