"""Runtime schedules on DST days in several zones fire exactly the times of
docs/time-zones.md, checked against an oracle written here (brute force over UTC minutes),
then judged by the audit (its own oracle). The dispatcher's clock is the test's: it ticks
every 30 minutes through two days around each change, and each schedule's catch-up policy
`all` runs every due slot, so the slots in the ledger are exactly the fire times the
engine computed."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from tests.integration import runtime

pytestmark = pytest.mark.timeout(300)

# (zone, the local date of an offset change in 2026), both directions, four ways of changing.
CHANGES = [
    ("America/New_York", date(2026, 3, 8)),  # 02:00 -> 03:00
    ("America/New_York", date(2026, 11, 1)),  # 02:00 -> 01:00
    ("Europe/London", date(2026, 10, 25)),  # 02:00 BST -> 01:00 GMT
    ("Australia/Lord_Howe", date(2026, 10, 4)),  # 02:00 -> 02:30: a half-hour gap
    ("America/Santiago", date(2026, 9, 6)),  # 00:00 -> 01:00: no local midnight
]
CRONS = ["30 2 * * *", "30 1 * * *", "0 0 * * *", "15 * * * *"]


def tz(name: str) -> ZoneInfo:
    from importlib import resources

    with resources.files("tzdata.zoneinfo").joinpath(*name.split("/")).open("rb") as f:
        return ZoneInfo.from_file(f, key=name)


def oracle(cron: str, zone: ZoneInfo, start: datetime, end: datetime) -> list[datetime]:
    """The fire times in [start, end] by the rules of docs/time-zones.md, by brute force.

    A fixed hour runs on each local day at the first real minute whose wall clock is at or
    past its time (a time in a gap runs when the gap ends; a repeated time runs once, the
    first time); a wildcard hour runs at every real minute whose wall minute matches."""
    minute_field, hour_field = cron.split()[:2]
    minute = int(minute_field)
    minutes = []
    t = start
    while t <= end:
        minutes.append(t)
        t += timedelta(minutes=1)
    if hour_field == "*":
        return [t for t in minutes if t.astimezone(zone).minute == minute]
    wanted = time(int(hour_field), minute)
    fires, seen = [], set()
    for t in minutes:
        local = t.astimezone(zone)
        if local.date() not in seen and local.time().replace(second=0) >= wanted:
            seen.add(local.date())
            fires.append(t)
    # A day whose first minute in the window is already past the time began before it.
    first_day = start.astimezone(zone).date()
    return [t for t in fires if t.astimezone(zone).date() != first_day or t != start]


async def test_dst_days_in_five_zones(db, database_url, client, task_queue, start_workers):
    start_workers(1)
    runtime.fresh_ids(db)
    plans = []
    for zone_name, day in CHANGES:
        zone = tz(zone_name)
        start = datetime.combine(day - timedelta(days=1), time(12), zone).astimezone(UTC)
        end = datetime.combine(day + timedelta(days=1), time(12), zone).astimezone(UTC)
        for cron in CRONS:
            sid = runtime.insert_schedule(
                db,
                tenant=f"{zone_name}-{day}",
                name=cron,
                kind="test-noop",
                cron=cron,
                timezone=zone_name,
                catchup="all",
                max_missed=1000,
                next_fire_at=start,
                timing_since=start,
                end_at=end,
            )
            plans.append((sid, cron, zone, start, end))
    expected = {sid: oracle(cron, zone, start, end) for sid, cron, zone, start, end in plans}
    async with runtime.dispatcher(database_url, client, task_queue) as d:
        windows = sorted({(start, end) for _, _, _, start, end in plans})
        for start, end in windows:
            now = start
            while now <= end + timedelta(minutes=30):
                await runtime.tick_all(d, now)
                now += timedelta(minutes=30)
        await runtime.settled(db, sum(len(v) for v in expected.values()), timeout=180)
    for sid, cron, zone, _, _ in plans:
        got = [r["scheduled_at"] for r in runtime.slot_rows(db, sid)]
        assert got == expected[sid], (zone.key, cron)
        assert {r["status"] for r in runtime.slot_rows(db, sid)} == {"completed"}
    # Spot checks of the rules themselves (so the oracle is not merely agreeing).
    by_key = {(zone.key, cron, start.date()): expected[sid] for sid, cron, zone, start, _ in plans}
    ny_spring = by_key[("America/New_York", "30 2 * * *", date(2026, 3, 7))]
    assert datetime(2026, 3, 8, 7, 0, tzinfo=UTC) in ny_spring  # 02:30 -> 03:00 EDT
    ny_fall = by_key[("America/New_York", "15 * * * *", date(2026, 10, 31))]
    local = [t.astimezone(tz("America/New_York")) for t in ny_fall]
    assert len([t for t in local if t.date() == date(2026, 11, 1) and t.hour == 1]) == 2
    for start, end in windows:
        await runtime.audit_clean(database_url, client, task_queue, start, end, late=runtime.LATE)
