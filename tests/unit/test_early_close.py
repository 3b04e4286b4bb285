"""Markets' early closes (issue 43, item 3): a job asks to run at the close, or to skip the
hours after it, and `next`, the spec and the catalog say so.

The oracle is typed in here from the exchanges' published lists of short sessions (NYSE and
Nasdaq close at 13:00 New York time on the day after Thanksgiving, on 24 December when it is
a weekday and not the observed Christmas holiday, and on 3 July when it is a weekday and not
the observed Independence Day; the LSE at 12:30 on 24 and 31 December), sharing nothing with
`timing/`.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import holidays
import pytest

from schedules.catalog.model import parse_each
from schedules.catalog.times import adjustments, calendar_notes
from tests.unit.calendar_match import utc_matching_times
from timing.business import EARLY_CLOSES

NEW_YORK = ZoneInfo("America/New_York")
NYSE_SHORT_2026_2028 = [
    date(2026, 11, 27),
    date(2026, 12, 24),
    date(2027, 11, 26),
    date(2028, 7, 3),
    date(2028, 11, 24),
]


def job(**fields):
    table = {
        "description": "settle at the close",
        "owner": "payments",
        "kind": "card-settlement",
        "cron": "0 16 * * 1-5",
        "timezone": "America/New_York",
        "calendar": "NYSE",
        "on_early_close": "close",
        "timeout": "10m",
        "params": {"currency": "USD"},
    } | fields
    jobs, problems = parse_each({"settle-close": table})
    return jobs, problems


def ny(day: date, hour: int, minute: int = 0) -> datetime:
    return datetime.combine(day, time(hour, minute), NEW_YORK).astimezone(UTC)


@pytest.mark.parametrize("market", sorted(EARLY_CLOSES))
def test_the_table_of_closes_agrees_with_the_packages_words(market):
    """The package names each short session's hour in words; the table holds it as a time."""
    _, close = EARLY_CLOSES[market]
    spoken = f"{close.hour % 12 or 12}:{close.minute:02d}pm"
    sessions = holidays.financial_holidays(
        market, years=range(2020, 2031), categories=("half_day",)
    )
    assert sessions, market
    for day, name in sessions.items():
        assert re.search(rf"close at {spoken}\b", name), (market, day, name)


def test_close_runs_the_four_oclock_slot_at_one_on_short_sessions():
    (settle,), problems = job()
    assert not problems
    start, end = ny(date(2026, 1, 1), 0), ny(date(2029, 1, 1), 0)
    fires = settle.timing.fires(start, end)
    moved = {f.slot: f.at for f in fires if f.at != f.slot}
    assert moved == {ny(d, 16): ny(d, 13) for d in NYSE_SHORT_2026_2028}
    friday = next(f for f in fires if f.slot == ny(date(2026, 11, 27), 16))
    assert friday.moved == (
        "runs at the close, 13:00, not 16:00: NYSE closes early on Fri 2026-11-27: "
        "Day after Thanksgiving Day (markets close at 1:00pm)"
    )
    # The slot keeps its identity: the run at 13:00 is the 16:00 slot's.
    assert settle.timing.run_at(ny(date(2026, 12, 24), 16)) == ny(date(2026, 12, 24), 13)
    assert settle.timing.what_of(ny(date(2026, 12, 23), 16)) == ""


def test_skip_drops_the_slots_after_the_close_and_says_so():
    (hourly,), problems = job(cron="0 9-16 * * 1-5", on_early_close="skip")
    assert not problems
    day = date(2026, 12, 24)
    times = hourly.timing.fire_times(ny(day, 0), ny(day + timedelta(days=5), 0))
    assert [t for t in times if t < ny(day, 23)] == [ny(day, h) for h in range(9, 14)]
    assert hourly.timing.run_at(ny(day, 15)) is None
    assert hourly.timing.what_of(ny(day, 15)) == (
        "skipped: NYSE closes early on Thu 2026-12-24 at 13:00: Christmas Eve "
        "(markets close at 1:00pm) (on_early_close skip)"
    )
    notes = calendar_notes(hourly, ny(day, 0), times)
    assert (
        "14:00 to 16:00 skipped: NYSE closes early on Thu 2026-12-24"
        in notes[ny(date(2026, 12, 28), 9)]
    )
    assert any(
        "closes early" in line for line in adjustments(hourly.timing, ny(day, 0), ny(day, 23))
    )


def test_keep_is_the_default_and_changes_nothing():
    (kept,), _ = job(on_early_close="keep")
    (plain,), _ = job(on_early_close=None)
    start, end = ny(date(2026, 11, 1), 0), ny(date(2027, 1, 1), 0)
    assert kept.timing.fire_times(start, end) == plain.timing.fire_times(start, end)
    assert ny(date(2026, 12, 24), 16) in plain.timing.fire_times(start, end)
    # Left out of what a worker of the release before reads, as an unset calendar is.
    assert "on_early_close" not in plain.timing.model_dump(mode="json")["calendar"]


def test_the_compiled_spec_fires_the_close_and_nothing_after_it():
    (settle,), _ = job()
    spec = settle.timing.spec(datetime(2026, 6, 1, tzinfo=UTC))
    first, last = ny(date(2026, 11, 23), 0), ny(date(2026, 12, 29), 0)
    matched = utc_matching_times(spec, first, last)
    assert ny(date(2026, 11, 27), 13) in matched and ny(date(2026, 11, 27), 16) not in matched
    assert ny(date(2026, 12, 24), 13) in matched and ny(date(2026, 12, 24), 16) not in matched
    assert ny(date(2026, 12, 23), 16) in matched
    assert matched == settle.timing.fire_times(first, last)
    assert "early close: close" in spec.calendars[0].comment


@pytest.mark.parametrize(
    ("fields", "line"),
    [
        (
            {"calendar": None},
            "on_early_close: needs a market calendar to say which days close early (got 'close'",
        ),
        (
            {"calendar": "US"},
            "on_early_close: calendar 'US' has no early closes this project knows the hour of",
        ),
        (
            {"timezone": "Europe/London"},
            "on_early_close: the job's timezone must be its market's, America/New_York, to "
            "follow its close (got timezone 'Europe/London')",
        ),
        ({"on_early_close": "later"}, "on_early_close: "),
    ],
)
def test_a_job_that_cannot_follow_a_close_is_refused_in_one_line(fields, line):
    table = {k: v for k, v in fields.items() if v is not None}
    jobs, problems = job(**table) if None not in fields.values() else _without_calendar()
    assert not jobs
    (lines,) = problems.values()
    assert len(lines) == 1 and lines[0].startswith(f"job 'settle-close': {line}"), lines
    assert "\n" not in lines[0]


def _without_calendar():
    jobs, problems = parse_each(
        {
            "settle-close": {
                "description": "x",
                "owner": "payments",
                "kind": "card-settlement",
                "cron": "0 16 * * 1-5",
                "timezone": "America/New_York",
                "on_early_close": "close",
                "timeout": "10m",
                "params": {"currency": "USD"},
            }
        }
    )
    return jobs, problems
