"""The audit's independent fire times (schedules/audit/oracle.py): the DST rules of
docs/time-zones.md, and agreement with the engine's `timing/` on whole years."""

from __future__ import annotations

import ast
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from schedules.audit.oracle import Timing, parse, zone
from timing import Timing as EngineTiming

AUDIT = Path(__file__).resolve().parents[2] / "schedules" / "audit"


def fires(cron: str, tz: str, day: str, days: int = 1) -> list[datetime]:
    start = datetime.fromisoformat(day).replace(tzinfo=UTC) - timedelta(hours=14)
    end = start + timedelta(days=days, hours=28)
    found = Timing(cron, None, tz).fire_times(start, end)
    return [t for t in found if t.astimezone(zone(tz)).date().isoformat() == day]


def test_the_audit_shares_no_code_with_timing():
    for path in AUDIT.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not any(n == "timing" or n.startswith("timing.") for n in names), path


def test_spring_forward_runs_a_fixed_time_once_at_the_end_of_the_gap():
    assert fires("30 2 * * *", "America/New_York", "2027-03-14") == [
        datetime(2027, 3, 14, 7, 0, tzinfo=UTC)  # 03:00 EDT
    ]
    assert fires("0,30 2 * * *", "America/New_York", "2027-03-14") == [
        datetime(2027, 3, 14, 7, 0, tzinfo=UTC)
    ]


def test_fall_back_runs_a_fixed_time_once_the_first_time():
    assert fires("30 1 * * *", "America/New_York", "2027-11-07") == [
        datetime(2027, 11, 7, 5, 30, tzinfo=UTC)  # 01:30 EDT
    ]
    assert fires("0 1 * * *", "Europe/London", "2027-10-31") == [
        datetime(2027, 10, 31, 0, 0, tzinfo=UTC)  # 01:00 BST
    ]


@pytest.mark.parametrize(
    ("cron", "tz", "day", "count"),
    [
        ("0 * * * *", "America/New_York", "2027-03-14", 23),
        ("0 * * * *", "America/New_York", "2027-11-07", 25),
        ("0 * * * *", "Europe/London", "2027-03-28", 23),
        ("0 * * * *", "Europe/London", "2027-10-31", 25),
        ("*/30 * * * *", "Australia/Lord_Howe", "2027-10-03", 47),
        ("*/30 * * * *", "Australia/Lord_Howe", "2027-04-04", 49),
        ("0 * * * *", "Australia/Lord_Howe", "2027-04-04", 24),
        ("0 * * * *", "Antarctica/Troll", "2027-03-28", 22),
    ],
)
def test_wildcard_hours_follow_real_time(cron, tz, day, count):
    assert len(fires(cron, tz, day)) == count


def test_a_day_without_midnight_in_santiago():
    assert fires("0 0 * * *", "America/Santiago", "2027-09-05") == [
        datetime(2027, 9, 5, 4, 0, tzinfo=UTC)  # 01:00 -03, the first instant after the gap
    ]
    sunday = fires("0 2 * * 0", "America/Santiago", "2027-09-05")
    assert len(sunday) == 1


def test_cron_fields_and_either_day():
    cron = parse("0 9 1 * mon")
    assert cron.either_day and cron.fixed_hour
    assert parse("@hourly").fixed_hour is False
    assert parse("*/15 1-3 * jan-mar 1-5").months == frozenset({1, 2, 3})


@pytest.mark.parametrize(
    ("cron", "tz"),
    [
        ("30 2 * * *", "Europe/London"),
        ("0 2 * * *", "America/New_York"),
        ("30 1 * * *", "America/New_York"),
        ("0 * * * *", "America/New_York"),
        ("0 3 1 * *", "America/New_York"),
        ("15 2 * * *", "Australia/Lord_Howe"),
        ("0 0 * * 0", "America/Santiago"),
        ("*/20 0-2 * * *", "Europe/London"),
    ],
)
def test_the_oracle_agrees_with_the_engine_over_two_years(cron, tz):
    start, end = datetime(2027, 1, 1, tzinfo=UTC), datetime(2029, 1, 1, tzinfo=UTC)
    engine = EngineTiming(cron=cron, timezone=tz).fire_times(start, end)
    assert Timing(cron, None, tz).fire_times(start, end) == engine


def test_interval_and_bounds():
    t0 = datetime(2027, 1, 1, tzinfo=UTC)
    timing = Timing(None, timedelta(seconds=90), "UTC", start_at=t0 + timedelta(seconds=100))
    assert timing.fire_times(t0, t0 + timedelta(seconds=400)) == [
        t0 + timedelta(seconds=s) for s in (180, 270, 360)
    ]
