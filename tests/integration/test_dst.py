"""DST on the real server: compiled schedules fire what `timing.firetimes` says, for every
New York and London change of the next five years.

Each schedule is created paused (its action targets an unused task queue) with `start_at`
shortly before a change, and the server's own `next_action_times` are compared with the
expected fire times. Temporal alone gets several of these wrong; the last test pins that
down, so the day it stops being true is noticed.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleSpec,
    ScheduleState,
)

from schedules.catalog.model import parse_catalog
from schedules.sync.apply import sync
from schedules.sync.plan import plan
from tests.helpers import assert_eventually
from timing import Timing
from timing.calendars import compiled_until

NY, LONDON = "America/New_York", "Europe/London"
YEARS = 5
# (cron, zone, start_at this long before each change so the next 10 fire times cover it)
CASES = [
    ("30 2 * * *", NY, timedelta(days=2)),  # in the gap: once, at 03:00 EDT
    ("30 1 * * *", NY, timedelta(days=2)),  # in the repeated hour: once, the first
    ("0 * * * *", NY, timedelta(hours=4)),  # elapsed time: 23 / 25 a day
    ("0 9,17 * * 1-5", NY, timedelta(days=2)),  # never meets a change
    ("30 1 * * *", LONDON, timedelta(days=2)),  # in London's gap and repeated hour
    ("30 2 * * *", LONDON, timedelta(days=2)),  # never meets a change (invoice reminders)
    ("0 0 * * *", LONDON, timedelta(days=2)),  # Temporal alone runs it twice on fall back
    ("0 * * * *", LONDON, timedelta(hours=4)),  # Temporal alone loses the second 01:00
]


def changes(zone: str, start: datetime, years: int) -> list[datetime]:
    """UTC-offset changes of `zone` in the next `years` years, to the hour."""
    tz = ZoneInfo(zone)
    found, moment = [], start.replace(minute=0, second=0, microsecond=0)
    offset = moment.astimezone(tz).utcoffset()
    while moment < start + timedelta(days=365 * years):
        moment += timedelta(hours=1)
        if moment.astimezone(tz).utcoffset() != offset:
            found.append(moment)
            offset = moment.astimezone(tz).utcoffset()
    return found


async def next_times(
    client: Client, spec: ScheduleSpec, task_queue: str, created: list
) -> tuple[list[datetime], ScheduleSpec]:
    """Create a paused schedule with `spec`; return the server's next fire times and spec."""
    handle = await client.create_schedule(
        f"dst-{uuid.uuid4().hex[:12]}",
        Schedule(
            action=ScheduleActionStartWorkflow("NeverRuns", id="never", task_queue=task_queue),
            spec=spec,
            state=ScheduleState(paused=True, note="DST test: never runs"),
        ),
    )
    created.append(handle)
    described = await handle.describe()
    times = [t.astimezone(UTC) for t in described.info.next_action_times]
    return times, described.schedule.spec


async def test_compiled_schedules_fire_as_cron_does_across_five_years_of_changes(
    client, task_queue
):
    now = datetime.now(UTC)
    limit = asyncio.Semaphore(16)
    created: list = []

    async def check(cron: str, zone: str, start_at: datetime) -> str | None:
        timing = Timing(cron=cron, timezone=zone, start_at=start_at)
        spec = timing.spec(now)
        async with limit:
            got, stored = await next_times(client, spec, task_queue, created)
        expected = timing.upcoming(now, 10)
        if len(got) != 10 or got != expected:
            return f"{cron!r} {zone} from {start_at:%Y-%m-%d %H:%M}Z: {got} != {expected}"
        # `schedules sync` compares compiled and stored calendars: they must round-trip.
        if (stored.calendars, stored.time_zone_name) != (spec.calendars, spec.time_zone_name):
            return f"{cron!r} {zone}: the server changed the calendars"
        return None

    checks = [
        check(cron, zone, change - lead)
        for cron, zone, lead in CASES
        # The changes of the next five calendar years: always ten a zone, and far enough
        # ahead that no fire time falls due while the test looks.
        for change in changes(zone, datetime(now.year + 1, 1, 1, tzinfo=UTC), YEARS)
    ]
    assert len(checks) == len(CASES) * 2 * YEARS
    try:
        problems = [p for p in await asyncio.gather(*checks) if p]
    finally:
        await asyncio.gather(*(h.delete() for h in created))
    assert not problems, "\n".join(problems)


async def test_temporal_alone_gets_dst_wrong_which_is_why_specs_are_compiled(client, task_queue):
    """Measured on the 1.32 dev server: plain cron strings in the job's zone.

    The server lists next fire times from its own clock, which a test cannot set: the
    changes looked at are next year's (months ahead, whenever the test runs), not fixed
    dates that would one day be in the past.
    """
    created: list = []
    year = datetime.now(UTC).year + 1
    (ny_spring, ny_fall) = [c.date() for c in changes(NY, datetime(year, 1, 1, tzinfo=UTC), 1)]
    (_, london_fall) = [c.date() for c in changes(LONDON, datetime(year, 1, 1, tzinfo=UTC), 1)]

    async def raw(cron: str, zone: str, start_at: datetime) -> list[datetime]:
        spec = ScheduleSpec(cron_expressions=[cron], time_zone_name=zone, start_at=start_at)
        times, _ = await next_times(client, spec, task_queue, created)
        return times

    def day_before(day: date) -> datetime:
        return datetime.combine(day - timedelta(days=1), time(), tzinfo=UTC)

    def local(day: date, hour: int, minute: int, zone: str, fold: int = 0) -> datetime:
        wall = datetime.combine(day, time(hour, minute, fold=fold), tzinfo=ZoneInfo(zone))
        return wall.astimezone(UTC)

    try:
        skipped = await raw("30 2 * * *", NY, day_before(ny_spring))
        twice = await raw("30 1 * * *", NY, day_before(ny_fall))
        midnight = await raw("0 0 * * *", LONDON, day_before(london_fall))
    finally:
        await asyncio.gather(*(h.delete() for h in created))
    # 02:30 on the spring-forward day does not exist in New York: Temporal skips the day
    # (cron's 03:00 EDT is not among its times; the next is 02:30 EDT the day after).
    assert local(ny_spring, 3, 0, NY) not in skipped
    assert skipped[1] == local(ny_spring + timedelta(days=1), 2, 30, NY)
    # 01:30 happens twice on the fall-back day: Temporal runs both.
    assert twice[1:3] == [local(ny_fall, 1, 30, NY), local(ny_fall, 1, 30, NY, fold=1)]
    # London midnight on its fall-back day (23:00Z the day before) runs again an hour later
    # (00:00Z, 01:00 BST).
    first = local(london_fall, 0, 0, LONDON)
    assert midnight[:2] == [first, first + timedelta(hours=1)]


async def test_sync_recompiles_a_dst_spec_once_its_horizon_is_a_year_short(client, task_queue):
    job_id = f"dst-nightly-{uuid.uuid4().hex[:8]}"
    (job,) = parse_catalog(
        {job_id: {"kind": "invoice-reminders", "cron": "30 2 * * *", "timezone": NY}}
    )
    handle = client.get_schedule_handle(job_id)
    now = datetime.now(UTC)  # one "now" for every sync here: a test at New Year is no different
    # The horizon counts the job's own years: New York's is still the old one until 05:00Z
    # on 1 January (tests/unit/test_timing.py), when now.year is already the new one.
    year = now.astimezone(ZoneInfo(NY)).year

    async def change():
        report, _ = await plan(client, [job], task_queue, prune=False, now=now)
        return report.changes[0]

    try:
        await sync(client, [job], task_queue, prune=False, now=now)
        described = await handle.describe()
        assert described.schedule.spec.time_zone_name == "UTC"
        assert compiled_until(described.schedule.spec).year == year + 10
        assert (await change()).action == "unchanged"

        a_year_ago = now - timedelta(days=366)
        last_year = job.timing.spec(a_year_ago)
        # What a sync a year ago left: last year's spec, and the digest of last year's schedule
        # (which is what makes a sync without --full describe the job again).
        await sync(client, [job], task_queue, prune=False, now=a_year_ago)

        async def noticed():  # once the listing (visibility) shows that digest
            found = await change()
            assert found.action == "update" and list(found.fields) == ["calendars"]
            return found

        stale = await assert_eventually(noticed, timeout=20)
        old, new = stale.fields["calendars"]
        assert old.endswith(f"until {compiled_until(last_year)}")
        assert new.endswith(f"in UTC until {year + 10}-12-31")

        await sync(client, [job], task_queue, prune=False, now=now)
        assert (await change()).action == "unchanged"
    finally:
        await handle.delete()
