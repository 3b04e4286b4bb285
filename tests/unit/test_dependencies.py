"""Slot dependencies, pure: which upstream slots map onto a slot (by instants, across
zones and DST days), the judgement of a wait by policy, and the catalog's refusals.

The expected windows (`tests/dependency_windows.py`) are UTC instants worked out by hand
from the zones' rules (the oracle), not computed by the code under test.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from activities.common.dependency_models import Dependency, UpstreamProgress, WaitInput
from activities.dependencies.judge import judge, progress, span_text, upstream_slots
from core.errors import CatalogError
from schedules.catalog.files import read_catalog
from schedules.catalog.model import parse_catalog
from tests.dependency_windows import COUNTS, WINDOWS, hours, utc
from timing import Timing

H = timedelta(hours=1)
HOURLY_UTC = Timing(cron="0 * * * *", timezone="UTC")


@pytest.mark.parametrize("case", sorted(WINDOWS))
def test_a_window_is_every_upstream_slot_after_our_previous_fire_time_up_to_ours(case):
    zone, slot, previous = WINDOWS[case]
    nightly = Timing(cron="0 2 * * *", timezone=zone)
    mapped = upstream_slots("window", nightly, slot, HOURLY_UTC)
    assert mapped == hours(previous + H, slot)  # (P, S]: not P, S itself included
    assert len(mapped) == COUNTS[case]


def test_a_window_maps_a_local_hourly_upstream_by_instants_too():
    zone, slot, previous = WINDOWS["london, fall back"]
    hourly_london = Timing(cron="0 * * * *", timezone="Europe/London")  # real time: 25 hours
    nightly = Timing(cron="0 2 * * *", timezone=zone)
    assert upstream_slots("window", nightly, slot, hourly_london) == hours(previous + H, slot)


def test_nothing_before_the_upstream_timing_took_effect_is_expected():
    zone, slot, _ = WINDOWS["new york, an ordinary night"]
    nightly = Timing(cron="0 2 * * *", timezone=zone)
    since = utc(2026, 11, 20, 3, 30)  # the upstream's schedule began firing here
    assert upstream_slots("window", nightly, slot, HOURLY_UTC, since) == hours(
        utc(2026, 11, 20, 4), slot
    )
    assert upstream_slots("window", nightly, utc(2026, 11, 19, 7), HOURLY_UTC, since) == []


def test_same_and_latest():
    every_15 = Timing(cron="*/15 * * * *", timezone="UTC")
    slot = utc(2026, 11, 20, 7)
    assert upstream_slots("same", every_15, slot, HOURLY_UTC) == [slot]
    assert upstream_slots("same", every_15, slot + timedelta(minutes=15), HOURLY_UTC) == []
    assert upstream_slots("latest", every_15, slot + timedelta(minutes=45), HOURLY_UTC) == [slot]
    assert upstream_slots("latest", every_15, slot, HOURLY_UTC) == [slot]  # at or before ours
    nightly_ny = Timing(cron="30 2 * * *", timezone="America/New_York")
    # 02:30 EST = 07:30Z: the latest hourly slot is 07:00Z, whatever the date's offset.
    assert upstream_slots("latest", nightly_ny, utc(2026, 11, 20, 7, 30), HOURLY_UTC) == [slot]


def _wait(on_failure: str, within: timedelta = timedelta(hours=2)) -> WaitInput:
    dep = Dependency(job="hourly-sync", slots="window", within=within, on_failure=on_failure)
    return WaitInput(
        job_name="nightly",
        scheduled_at=utc(2026, 11, 20, 7),
        execution_id=1,
        zone="America/New_York",
        depends_on=[dep],
        workflow_id="w",
        run_id="r",
        began_at=utc(2026, 11, 20, 7, 0, 1),
    )


def _progress(done: int, pending: int = 0, failed: int = 0) -> UpstreamProgress:
    slots = hours(utc(2026, 11, 19, 8), utc(2026, 11, 20, 7))
    rows = {s: ("completed", None) for s in slots[:done]}
    rows |= {s: ("failed", "boom\ntrace") for s in slots[done : done + failed]}
    dep = _wait("wait").depends_on[0]
    return progress(dep, "hourly-sync", "UTC", slots[: done + pending + failed], rows)


BEFORE = utc(2026, 11, 20, 8)  # within the 2h
AFTER = utc(2026, 11, 20, 9, 1)  # past it


@pytest.mark.parametrize(
    ("on_failure", "up", "now", "state", "overdue"),
    [
        ("wait", _progress(24), BEFORE, "ready", False),
        ("wait", _progress(21, pending=3), BEFORE, "waiting", False),
        ("wait", _progress(21, pending=3), AFTER, "waiting", True),
        ("wait", _progress(23, failed=1), BEFORE, "waiting", False),
        ("skip", _progress(21, pending=3), BEFORE, "waiting", False),
        ("skip", _progress(21, pending=3), AFTER, "skip", False),
        ("skip", _progress(21, pending=2, failed=1), BEFORE, "skip", False),
        ("run", _progress(21, pending=2, failed=1), BEFORE, "waiting", False),
        ("run", _progress(23, failed=1), BEFORE, "run", False),
        ("run", _progress(21, pending=3), AFTER, "run", False),
    ],
)
def test_the_policy_decides_on_a_failure_or_past_the_deadline(on_failure, up, now, state, overdue):
    result = judge(_wait(on_failure), [up], now)
    assert (result.state, result.overdue) == (state, overdue)
    assert result.deadline == utc(2026, 11, 20, 9, 0, 1)  # 2h after the run began to wait


def test_what_a_wait_shows_and_why_a_policy_decided():
    waiting = judge(_wait("wait"), [_progress(21, pending=3)], BEFORE)
    assert waiting.progress == (
        "waiting for hourly-sync 2026-11-20 05:00\u201307:00 UTC, 21 of 24 done "
        "(deadline 2026-11-20 04:00 EST)"
    )
    skipped = judge(_wait("skip"), [_progress(23, failed=1)], BEFORE)
    assert skipped.reason == (
        "upstream hourly-sync: 1 slot(s) settled without completing: "
        "2026-11-20 07:00 UTC failed (boom)"
    )
    late = judge(_wait("run"), [_progress(21, pending=3)], AFTER)
    assert late.reason.startswith("run anyway: upstream hourly-sync: 3 of 24 slot(s) not")
    assert span_text([utc(2026, 11, 20, 23), utc(2026, 11, 21, 1)], "UTC") == (
        "2026-11-20 23:00\u20132026-11-21 01:00 UTC"
    )


def _catalog_with(**tables) -> str:
    data = {k: dict(v) for k, v in read_catalog().items()}
    for job_id, table in tables.items():
        data[job_id] = data.get(job_id, {}) | table
    with pytest.raises(CatalogError) as refused:
        parse_catalog(data)
    return str(refused.value)


def _dep(**fields) -> dict:
    return {"job": "hourly-sync", "slots": "window", "within": "2h"} | fields


@pytest.mark.parametrize(
    ("deps", "says"),
    [
        ([_dep(job="hourly-synk")], "depends_on[0].job: no job 'hourly-synk' in the catalog"),
        ([_dep(job="nightly-reconcile")], "a job cannot depend on itself ('nightly-reconcile')"),
        ([_dep(), _dep(slots="latest")], "depends_on[1].job: 'hourly-sync' is named twice"),
        ([_dep(within="0s")], "depends_on.0.within: must be from 1s to 31d"),
        ([_dep(within="32d")], "depends_on.0.within: must be from 1s to 31d"),
        ([_dep(within=7200)], "depends_on.0.within: must be a duration in quotes"),
        ([_dep(slots="daily")], "depends_on.0.slots: Input should be 'same', 'window' or 'latest'"),
        ([_dep(on_failure="retry")], "depends_on.0.on_failure: Input should be 'wait', 'skip'"),
        ([{"job": "hourly-sync", "slots": "window"}], "depends_on.0.within: is required"),
        ([_dep(schedule="x")], "depends_on.0.schedule: Extra inputs are not permitted"),
    ],
)
def test_the_catalog_refuses_a_bad_dependency_in_one_line(deps, says):
    message = _catalog_with(**{"nightly-reconcile": {"depends_on": deps}})
    assert message.startswith("job 'nightly-reconcile': ") and says in message, message
    assert message.endswith("nothing was changed") and "\n" not in message


def test_the_catalog_refuses_a_cycle_naming_each_job_on_it():
    message = _catalog_with(
        **{"hourly-sync": {"depends_on": [_dep(job="nightly-reconcile", slots="latest")]}}
    )
    assert "job 'hourly-sync': depends_on: a cycle: hourly-sync -> nightly-reconcile" in message
    assert "job 'nightly-reconcile': depends_on: a cycle: nightly-reconcile -> hourly" in message


def test_the_catalog_refuses_a_same_mapping_that_never_lines_up():
    message = _catalog_with(**{"invoice-reminders": {"depends_on": [_dep(slots="same")]}})
    assert "'same' needs each fire time of this job to be one of hourly-sync's" in message
    assert "use 'latest'" in message


def _ny(day: int, hour: int) -> object:
    from datetime import UTC, datetime
    from zoneinfo import ZoneInfo

    return datetime(2026, 11, day, hour, tzinfo=ZoneInfo("America/New_York")).astimezone(UTC)


@pytest.mark.parametrize(
    ("rule", "same", "latest"),
    [
        # Thanksgiving (Thursday 26 November 2026) moves the upstream's Thursday slot to
        # Friday: it is still Thursday's slot, and Thursday's downstream waits for it.
        ("following", [_ny(26, 9)], _ny(26, 9)),
        ("preceding", [_ny(26, 9)], _ny(26, 9)),
        # Skipped: it never runs, so nothing waits for it; the latest is Wednesday's.
        ("skip", [], _ny(25, 9)),
    ],
)
def test_an_upstream_calendar_maps_by_its_slots_not_where_it_moves_them(rule, same, latest):
    from timing.business import BusinessCalendar, CalendarRule

    nyse = CalendarRule(calendar=BusinessCalendar(name="NYSE", base="NYSE"), on_holiday=rule)
    upstream = Timing(cron="0 9 * * *", timezone="America/New_York", calendar=nyse)
    at9 = Timing(cron="0 9 * * *", timezone="America/New_York")
    at10 = Timing(cron="0 10 * * *", timezone="America/New_York")
    assert upstream_slots("same", at9, _ny(26, 9), upstream) == same
    assert upstream_slots("latest", at10, _ny(26, 10), upstream) == [latest]
    # Our window, on a calendar that closes Thanksgiving: Friday's slot covers the day
    # after our previous slot on our cron's grid (Thursday 09:00), which did not run.
    ours = Timing(cron="0 9 * * *", timezone="America/New_York", calendar=nyse)
    hourly = Timing(cron="0 * * * *", timezone="America/New_York")
    window = upstream_slots("window", ours, _ny(27, 9), hourly)
    assert window[0] == _ny(26, 10) and window[-1] == _ny(27, 9) and len(window) == 24
