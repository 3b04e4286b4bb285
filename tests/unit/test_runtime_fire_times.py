"""A runtime schedule's next fire times on DST days, in several zones, against an oracle
written here: every UTC minute of the days around each change, read in the zone with
`zoneinfo` (from the `tzdata` package's files, the project's one database), matched by a
field matcher written here, and the rules of docs/time-zones.md applied by brute force. Nothing of the
product's timing functions is used by the oracle.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from importlib import resources
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest

from schedules.tenants import Definition, next_fire_at, next_fire_times

# (zone, a local date the zone changes its offset): spring forward and fall back, a
# half-hour change, changes at local midnight, and a zone that never changes.
DAYS = [
    ("America/New_York", "2027-03-14"),
    ("America/New_York", "2027-11-07"),
    ("Europe/London", "2027-03-28"),
    ("Europe/London", "2027-10-31"),
    ("Australia/Lord_Howe", "2027-10-03"),
    ("Australia/Lord_Howe", "2027-04-04"),
    ("America/Santiago", "2027-09-05"),
    ("America/Santiago", "2027-04-04"),
    ("Asia/Tokyo", "2027-03-14"),
]
CRONS = ["30 2 * * *", "30 1 * * *", "0 0 * * *", "0 * * * *", "*/30 * * * *", "15 2 * * 0"]
MINUTE = timedelta(minutes=1)


def tz(name: str) -> ZoneInfo:
    with resources.files("tzdata.zoneinfo").joinpath(name).open("rb") as f:
        return ZoneInfo.from_file(f, key=name)


def matches(cron: str, when: datetime) -> bool:
    """The five fields of the crons above: `*`, `*/N` or a number; day of week 0 = Sunday."""
    values = (when.minute, when.hour, when.day, when.month, when.isoweekday() % 7)
    for field, value in zip(cron.split(), values, strict=True):
        if field == "*":
            continue
        if field.startswith("*/"):
            if value % int(field[2:]):
                return False
        elif int(field) != value:
            return False
    return True


def fixed_hour(cron: str) -> bool:
    hour = cron.split()[1]
    return "*" not in hour and "/" not in hour


def wall(instant: datetime, zone: ZoneInfo) -> datetime:
    return instant.astimezone(zone).replace(tzinfo=None)


def oracle(cron: str, zone_name: str, start: datetime, end: datetime) -> list[datetime]:
    """Fire times in [start, end) by brute force over UTC minutes."""
    zone = tz(zone_name)
    minutes = []
    t = start
    while t < end:
        minutes.append(t)
        t += MINUTE
    if not fixed_hour(cron):  # real elapsed time: every instant whose wall time matches
        return [t for t in minutes if matches(cron, wall(t, zone))]
    found: set[datetime] = set()
    seen_walls: set[datetime] = set()
    for t in minutes:  # each matching wall time once, at its first instant
        w = wall(t, zone)
        if matches(cron, w) and w not in seen_walls:
            seen_walls.add(w)
            found.add(t)
    # Wall times the zone skipped: at the first instant after the gap.
    for before, after in pairwise(minutes):
        low, high = wall(before, zone), wall(after, zone)
        missing = low + MINUTE
        while missing < high:
            if matches(cron, missing):
                found.add(after)
            missing += MINUTE
    return sorted(found)


@pytest.mark.parametrize("cron", CRONS)
@pytest.mark.parametrize(("zone_name", "day"), DAYS, ids=[f"{z}-{d}" for z, d in DAYS])
def test_next_fire_times_match_the_oracle_on_dst_days(zone_name, day, cron):
    midnight = datetime.fromisoformat(day).replace(tzinfo=tz(zone_name)).astimezone(UTC)
    start, end = midnight - timedelta(days=1), midnight + timedelta(days=2)
    expected = oracle(cron, zone_name, start, end)
    schedule = Definition(tenant="t", name="n", kind="test-noop", cron=cron, timezone=zone_name)
    got = [f.at for f in next_fire_times(schedule, start - MINUTE, len(expected) + 5)]
    assert [t for t in got if t < end] == expected
    # The next slot a create stores is the first of them after the clock.
    for now in expected[:: max(len(expected) // 5, 1)]:
        assert next_fire_at(schedule, now, start) == next(t for t in got if t > now)


def test_dst_cases_are_flagged():
    new_york = Definition(
        tenant="t", name="n", kind="test-noop", cron="30 2 * * *", timezone="America/New_York"
    )
    after = datetime(2027, 3, 12, tzinfo=UTC)
    times = next_fire_times(new_york, after, 4)
    assert [f.at for f in times][2] == datetime(2027, 3, 14, 7, 0, tzinfo=UTC)  # 03:00 EDT
    assert times[2].dst == "spring forward: 02:30 does not exist, runs at 03:00"
    assert [f.dst for f in times if f is not times[2]] == [None, None, None]
    fall = new_york.model_copy(update={"cron": "30 1 * * *"})
    notes = [f.dst for f in next_fire_times(fall, datetime(2027, 11, 6, tzinfo=UTC), 3)]
    assert notes == [None, "fall back: runs once, at the first 01:30 (EDT)", None]


def test_timing_since_keeps_an_edit_from_reaching_back():
    schedule = Definition(
        tenant="t", name="n", kind="test-noop", cron="0 9 * * *", timezone="Europe/London"
    )
    now = datetime(2027, 6, 1, 7, 0, tzinfo=UTC)
    edited = datetime(2027, 6, 1, 8, 30, tzinfo=UTC)  # the timing took effect later
    assert next_fire_at(schedule, now, edited) == datetime(2027, 6, 2, 8, 0, tzinfo=UTC)
    assert next_fire_at(schedule, now, now) == datetime(2027, 6, 1, 8, 0, tzinfo=UTC)
    bounded = schedule.model_copy(update={"end_at": datetime(2027, 6, 1, 9, tzinfo=UTC)})
    assert next_fire_at(bounded, edited, edited) is None  # past end_at: none left


def test_calendar_moves_are_noted_and_each_slot_knows_when_it_runs():
    """NYSE days, `preceding`, 09:00 New York: Thanksgiving 2026 (Thursday 26 November)
    runs on the Wednesday before, with the Wednesday's own slot; the weekend's on Friday.
    The schedule's own slots know their run time; another instant is no slot of it."""
    from schedules.tenants.fires import due_time

    ny = ZoneInfo("America/New_York")

    def at9(day: int) -> datetime:
        return datetime(2026, 11, day, 9, tzinfo=ny).astimezone(UTC)

    schedule = Definition(
        tenant="t", name="n", kind="test-noop", cron="0 9 * * *", timezone="America/New_York",
        calendar="NYSE", on_holiday="preceding",
    )  # fmt: skip
    times = next_fire_times(schedule, at9(24), 3)
    assert [f.at for f in times] == [at9(25), at9(27), at9(30)]
    assert times[0].calendar == (
        "moved from Thu 2026-11-26 09:00 to Wed 2026-11-25: NYSE holiday (Thanksgiving Day)"
    )
    assert times[1].calendar.count("moved from") == 2  # Saturday's and Sunday's
    assert times[2].calendar is None
    assert due_time(schedule, at9(26)) == at9(25) and due_time(schedule, at9(29)) == at9(27)
    assert due_time(schedule, at9(25)) == at9(25)
    assert due_time(schedule, at9(25) + timedelta(minutes=1)) is None  # not one of its slots
    skipping = schedule.model_copy(update={"on_holiday": "skip"})
    assert due_time(skipping, at9(26)) is None  # its calendar skips it
