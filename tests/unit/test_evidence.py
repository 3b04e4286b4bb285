"""Compile by evidence: whatever form `compile_spec` picks, the spec fires the intended times.

The compiler evaluates a spec in the job's own zone only on the days around offset changes
(`timing.calendars.local_is_right`). Here every compiled spec is evaluated with the model of
Temporal's matching over whole years instead and compared with the intended fire times
(`Timing.fire_times`), so a decision the windows got wrong would show.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.unit.calendar_match import utc_matching_times
from timing import Timing
from timing.temporal_model import matching_times
from timing.zones import changes

NOW = datetime(2027, 1, 1, tzinfo=UTC)
# Every kind of change: New York and London (one hour, either side of Greenwich), Santiago,
# Havana, Azores, Beirut, Cairo, Nuuk (at local midnight), Lord Howe (30 minutes), Troll
# (2 hours), Dublin (negative DST in the tz database), Chatham (a 45-minute offset), Tokyo
# (none).
ZONES = [
    "America/New_York",
    "Europe/London",
    "America/Santiago",
    "America/Havana",
    "Atlantic/Azores",
    "Asia/Beirut",
    "Africa/Cairo",
    "America/Nuuk",
    "Australia/Lord_Howe",
    "Antarctica/Troll",
    "Europe/Dublin",
    "Pacific/Chatham",
    "Asia/Tokyo",
]
DAILY = [
    "0 0 * * *",
    "30 0 * * *",
    "0 1 * * *",
    "30 1 * * *",
    "0 2 * * *",
    "30 2 * * *",
    "15 2 * * *",
    "0 3 * * *",
    "45 23 * * *",
    "0 2 * * 0",
    "0 2 * * 6",
    "0 0 * * 1-5",
    "15 1 1,15 * *",
    "0 9 1 * 1",
    "0 12 * * 0",
]
FREQUENT = ["0 * * * *", "*/30 * * * *", "0 */2 * * *", "0 1-3 * * *", "*/20 0-3 * * *"]


def served(spec, start, end) -> list[datetime]:
    """What the server fires in [start, end): a spec in UTC by plain matching (exact, and
    quick over the many calendars of a UTC compilation), any other by the model."""
    if spec.time_zone_name == "UTC":
        return utc_matching_times(spec, start, end)
    return matching_times(spec, start - timedelta(seconds=1), end - timedelta(seconds=1))


@pytest.mark.parametrize("zone", ZONES)
def test_daily_and_weekly_jobs_over_a_whole_year(zone):
    start, end = NOW, NOW.replace(year=NOW.year + 1)
    wrong = []
    for cron in DAILY:
        spec = Timing(cron=cron, timezone=zone).spec(NOW)
        intended = Timing(cron=cron, timezone=zone).fire_times(start, end)
        if served(spec, start, end) != intended:
            wrong.append(f"{cron!r} in {zone} compiled to {spec.time_zone_name}")
    assert not wrong, wrong


@pytest.mark.parametrize("zone", ZONES)
def test_frequent_jobs_over_each_month_with_a_change(zone):
    months = {(c.at.year, c.at.month) for c in changes(zone, NOW, NOW + timedelta(days=366))}
    months.add((2027, 6))  # and one month without a change
    wrong = []
    for cron in FREQUENT:
        spec = Timing(cron=cron, timezone=zone).spec(NOW)
        for year, month in sorted(months):
            start = datetime(year, month, 1, tzinfo=UTC) - timedelta(days=1)
            end = start + timedelta(days=33)
            intended = Timing(cron=cron, timezone=zone).fire_times(start, end)
            if served(spec, start, end) != intended:
                wrong.append(f"{cron!r} in {zone} ({spec.time_zone_name}), {year}-{month:02}")
    assert not wrong, wrong


@pytest.mark.parametrize(
    ("cron", "zone"),
    [
        ("0 2 * * 0", "America/Santiago"),  # the case: no run that Sunday
        ("0 2 * * 6", "America/Santiago"),  # ...and an extra one for a Saturday job
        ("0 12 * * 0", "America/Havana"),
        ("0 12 * * 0", "Atlantic/Azores"),
    ],
)
def test_jobs_temporal_gets_wrong_where_midnight_is_skipped_go_to_utc(cron, zone):
    assert Timing(cron=cron, timezone=zone).spec(NOW).time_zone_name == "UTC"
