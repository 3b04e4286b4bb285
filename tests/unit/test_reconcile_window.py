"""The local day a nightly-reconcile run checks, across clock changes, without servers."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from pydantic import ValidationError

from jobs.nightly_reconcile.activities import ReconcileParams, previous_local_day

NEW_YORK = "America/New_York"


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


@pytest.mark.parametrize(
    ("scheduled_at", "day", "start", "hours"),
    [
        # An ordinary night: 02:00 EST is 07:00Z.
        ("2026-11-29T07:00:00Z", date(2026, 11, 28), "2026-11-28T05:00:00Z", 24),
        # After spring forward the day had 23 hours; after fall back, 25.
        ("2027-03-15T06:00:00Z", date(2027, 3, 14), "2027-03-14T05:00:00Z", 23),
        ("2027-11-08T07:00:00Z", date(2027, 11, 7), "2027-11-07T04:00:00Z", 25),
        # The 02:00 that does not exist runs at 03:00 EDT: still the day before.
        ("2027-03-14T07:00:00Z", date(2027, 3, 13), "2027-03-13T05:00:00Z", 24),
    ],
)
def test_the_day_before_the_slot_in_local_time(scheduled_at, day, start, hours):
    window = previous_local_day(utc(scheduled_at), NEW_YORK)
    assert window.day == day
    assert window.start == utc(start)
    assert window.end - window.start == timedelta(hours=hours)


def test_the_local_date_decides_not_the_utc_date():
    # 21:00 in New York is 02:00Z the next day: the day before is the local one.
    window = previous_local_day(utc("2026-11-30T02:00:00Z"), NEW_YORK)
    assert window.day == date(2026, 11, 28)
    # 23:30 local on the day is inside it, though its UTC date is the day after.
    assert window.start <= utc("2026-11-28T23:30:00-05:00") < window.end
    assert window.end == utc("2026-11-29T00:00:00-05:00")


def test_days_whose_midnight_is_skipped_or_repeated():
    # Santiago changes its clocks at midnight. 2027-09-05 starts at 01:00 (no midnight);
    # 2027-04-03 ends at its second midnight, an hour after the first.
    short = previous_local_day(utc("2027-09-06T12:00:00Z"), "America/Santiago")
    assert (short.day, short.start, short.end - short.start) == (
        date(2027, 9, 5),
        utc("2027-09-05T01:00:00-03:00"),
        timedelta(hours=23),
    )
    long = previous_local_day(utc("2027-04-04T12:00:00Z"), "America/Santiago")
    assert (long.day, long.end, long.end - long.start) == (
        date(2027, 4, 3),
        utc("2027-04-04T00:00:00-04:00"),
        timedelta(hours=25),
    )


def test_params_name_the_bad_zone_currency_or_threshold():
    with pytest.raises(ValidationError, match="is not a known IANA time zone: 'America/NYC'"):
        ReconcileParams(ledger_timezone="America/NYC")
    with pytest.raises(ValidationError, match="currency"):
        ReconcileParams(currency="usd")
    with pytest.raises(ValidationError, match="threshold_cents"):
        ReconcileParams(threshold_cents=-1)
