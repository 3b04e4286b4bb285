"""`schedules verify`'s comparison, without a server: matching, windows, verdicts, causes."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from itertools import pairwise

from temporalio.client import ScheduleCalendarSpec, ScheduleRange

from schedules.catalog.model import parse_catalog
from schedules.cli.verify import divergence_line, exit_code, verdict_lines
from schedules.health.verify import (
    FULL_CHECK,
    Verdict,
    by_day,
    diagnose,
    unmatched,
    windows,
)
from timing import Timing, zone

NOW = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
NY = "America/New_York"


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def job(cron: str, zone: str = NY, **extra):
    (found,) = parse_catalog(
        {"j": {"kind": "invoice-reminders", "cron": cron, "timezone": zone, **extra}}
    )
    return found


def test_exact_times_match_one_for_one():
    timing = Timing(cron="0 * * * *", timezone="UTC")
    intended = [utc(2027, 1, 1, h) for h in range(3)]
    assert unmatched(timing, intended, intended, utc(2027, 1, 1), utc(2027, 1, 2)) == ([], [])
    served = [intended[0], intended[2], utc(2027, 1, 1, 2, 30)]
    missing, extra = unmatched(timing, intended, served, utc(2027, 1, 1), utc(2027, 1, 2))
    assert (missing, extra) == ([intended[1]], [utc(2027, 1, 1, 2, 30)])


def test_with_jitter_each_served_time_falls_within_its_intended_one():
    timing = Timing(cron="0 * * * *", timezone="UTC", jitter=timedelta(minutes=10))
    intended = [utc(2027, 1, 1, h) for h in range(3)]
    jittered = [t + timedelta(minutes=m) for t, m in zip(intended, (0, 9, 5), strict=True)]
    assert unmatched(timing, intended, jittered, utc(2027, 1, 1), utc(2027, 1, 2)) == ([], [])
    late = [jittered[0], intended[1] + timedelta(minutes=10), jittered[2]]
    missing, extra = unmatched(timing, intended, late, utc(2027, 1, 1), utc(2027, 1, 2))
    assert missing == [intended[1]] and extra == [late[1]]
    # Only what lies in the range counts: its edges are a jitter wide on both lists.
    assert unmatched(timing, intended, jittered[1:], utc(2027, 1, 1, 0, 30), utc(2027, 1, 2)) == (
        [],
        [],
    )


def test_a_job_that_fires_rarely_is_compared_over_the_whole_range():
    timing = job("30 2 * * *").timing
    assert windows(timing, NOW, NOW + timedelta(days=396)) == [(NOW, NOW + timedelta(days=396))]


def test_a_frequent_job_is_compared_on_change_days_and_the_first_of_each_month():
    timing = job("* * * * *").timing
    assert len(timing.fire_times(NOW, NOW + timedelta(days=396), limit=FULL_CHECK + 1)) > FULL_CHECK
    found = windows(timing, NOW, NOW + timedelta(days=396))
    local_days = {(a.astimezone(zone(NY)) + timedelta(hours=12)).date() for a, _ in found}
    assert date(2027, 3, 13) in local_days  # the day before the 2027-03-14 change
    assert date(2027, 11, 6) in local_days
    assert date(2027, 6, 1) in local_days  # a first of the month
    assert found[0][0] == NOW
    assert all(a < b for a, b in found) and all(b <= c for (_, b), (c, _) in pairwise(found))


def test_a_divergence_reads_as_the_local_date_intended_and_server():
    timing = Timing(cron="0 2 * * 0", timezone="America/Santiago")
    intended = [utc(2027, 9, 5, 5)]
    (divergence,) = by_day("weekly", timing, intended, [], intended, [])
    assert divergence.day == date(2027, 9, 5)
    assert divergence_line(divergence) == "2027-09-05: intended 02:00 -03 (05:00Z); server none"


def test_exit_codes_divergence_first_then_cannot_tell():
    ok, bad, unknown = Verdict("a", "ok"), Verdict("b", "diverges"), Verdict("c", "unknown")
    assert exit_code([ok]) == 0
    assert exit_code([ok, unknown]) == 2
    assert exit_code([ok, unknown, bad]) == 1
    assert verdict_lines(unknown)[0].startswith("CANNOT TELL")


def test_the_cause_an_edited_schedule_or_the_servers_database():
    nightly = job("0 9 * * *")
    written = nightly.timing.spec(NOW)
    assert written.time_zone_name == NY  # calendars in the job's zone
    edited = nightly.timing.spec(NOW)
    edited.calendars = [ScheduleCalendarSpec(hour=(ScheduleRange(10),), minute=(ScheduleRange(0),))]
    fired = utc(2027, 1, 4, 15)
    (divergence,) = by_day(
        "j", nightly.timing, [utc(2027, 1, 4, 14)], [fired], [utc(2027, 1, 4, 14)], [fired]
    )
    assert "edited behind sync's back" in diagnose(nightly, edited, NOW, [divergence])
    assert "the server's own time zone database" in diagnose(nightly, written, NOW, [divergence])
