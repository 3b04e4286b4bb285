"""Every zone, on the real server: what fires is what classic cron's DST rules say.

For every IANA zone whose offset changes in 2027-2031 (`zones_under_test`) and every cron of
`CRONS` (fixed hours around midnight and from 01:00 to 03:00, weekday and month-day
restrictions, wildcard and stepped hours), a paused schedule is created from the job's
compiled spec (`JobSpec.timing.spec`, what `sync` writes) and the server's own
`ListScheduleMatchingTimes` is compared with an oracle written here from the README's rules,
sharing no code with the product: the whole five years for the crons that fire at most
twice a day, the local days around every offset change for the others.

The oracle's rules (docs/time-zones.md): a cron matches local dates and wall-clock
times; a job whose hour field names hours outright (no `*`, no `/`) runs once at a time
that happens twice (the first), and at the end of the gap for a time that does not exist;
any other job runs at every occurrence of an existing time and never in a gap. When both
day fields are restricted, either may match.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from functools import cache

import pytest
from temporalio.client import Client, Schedule, ScheduleActionStartWorkflow, ScheduleState

from schedules.catalog.model import parse_catalog
from tests.integration.namespaces import fresh_namespace
from tests.integration.zones_under_test import (
    END,
    FIRST,
    bounded,
    changes,
    changing_zones,
    same_offsets,
    server_times,
    tz,
    windows,
)

CRONS = [
    "0 0 * * *",  # midnight: skipped or repeated where the change is at 00:00
    "30 1 * * *",  # in most zones' repeated hour
    "30 2 * * *",  # in most zones' gap
    "15 2 * * *",  # in Lord Howe's half-hour gap too
    "0 1-3 * * *",  # several fixed hours across both
    "0 2 * * 0",  # Sundays: the weekday Temporal misreads where midnight is skipped
    "0 2 * * 6",  # Saturdays
    "15 1 1,15 * *",  # days of the month
    "0 9 1 * 1",  # the 1st or a Monday
    "0 * * * *",  # wildcard hour: elapsed time
    "*/30 * * * *",  # every half hour
    "0 */2 * * *",  # stepped hour
]
NOW = datetime(2026, 12, 1, tzinfo=UTC)  # the compilation's clock: its horizon ends in 2036


# --- the oracle -------------------------------------------------------------------------


def _field(text: str, low: int, high: int) -> set[int]:
    values: set[int] = set()
    for part in text.split(","):
        base, _, step = part.partition("/")
        first, _, last = (f"{low}-{high}" if base == "*" else base).partition("-")
        values.update(range(int(first), int(last or first) + 1, int(step or 1)))
    return values


def oracle(cron: str, zone: str, start: datetime, end: datetime) -> list[datetime]:
    """The fire times in [start, end) by the README's rules, from the tzdata package."""
    return [datetime.fromtimestamp(t, UTC) for t in oracle_seconds(cron, zone, start, end)]


@cache
def _calendar(zone: str) -> tuple[tuple[int, int, int, int, int | None], ...]:
    """Each local date of 2026-12-30 to 2032-01-02 as (Unix day, day, month, weekday,
    offset in seconds); offset None within a day of a change (resolve time by time)."""
    zone_info = tz(zone)
    near = {c.date() + timedelta(days=d) for c in changes(zone) for d in (-1, 0, 1)}
    found, day, offset = [], date(2026, 12, 30), None
    while day <= date(2032, 1, 2):
        if day in near:
            offset = None
        elif offset is None:  # the first day of a stretch between changes
            midnight = datetime(day.year, day.month, day.day, 12, tzinfo=zone_info)
            offset = int(midnight.utcoffset().total_seconds())
        found.append((day.toordinal() - _EPOCH, day.day, day.month, day.isoweekday() % 7, offset))
        day += timedelta(days=1)
    return tuple(found)


_EPOCH = date(1970, 1, 1).toordinal()


def oracle_seconds(cron: str, zone: str, start: datetime, end: datetime) -> list[int]:
    """`oracle` as Unix seconds (quicker to make by the million, and to compare)."""
    minute, hour, dom, month, dow = cron.split()
    clocks = [(h, m) for h in sorted(_field(hour, 0, 23)) for m in sorted(_field(minute, 0, 59))]
    seconds = [h * 3600 + m * 60 for h, m in clocks]
    days, months = _field(dom, 1, 31), _field(month, 1, 12)
    weekdays = {w % 7 for w in _field(dow, 0, 7)}
    either = dom != "*" and dow != "*"
    fixed = "*" not in hour and "/" not in hour
    zone_info = tz(zone)

    def exists(wall: datetime, fold: int) -> int | None:
        instant = wall.replace(tzinfo=zone_info, fold=fold).astimezone(UTC)
        if instant.astimezone(zone_info).replace(tzinfo=None) != wall:
            return None
        return int(instant.timestamp())

    low, high = int(start.timestamp()), int(end.timestamp())
    calendar = _calendar(zone)
    first = max(low // 86400 - 2 - calendar[0][0], 0)  # consecutive days: index by day
    found: set[int] = set()
    for unix_day, day, month_number, weekday, offset in calendar[
        first : first + (high - low) // 86400 + 5
    ]:
        if month_number not in months:
            continue
        in_days, in_weekdays = day in days, weekday in weekdays
        if not ((in_days or in_weekdays) if either else in_days and in_weekdays):
            continue
        if offset is not None:  # one offset all day, every time exists once
            base = unix_day * 86400 - offset
            found.update(base + s for s in seconds)
            continue
        midnight = datetime(1970, 1, 1) + timedelta(days=unix_day)
        for (h, m), since_midnight in zip(clocks, seconds, strict=True):
            wall = midnight + timedelta(hours=h, minutes=m)
            # PEP 495: the two readings of a wall time agree unless it is in a gap (the
            # earlier reading has the smaller offset) or happens twice (the larger).
            early = int(wall.replace(tzinfo=zone_info, fold=0).utcoffset().total_seconds())
            late = int(wall.replace(tzinfo=zone_info, fold=1).utcoffset().total_seconds())
            local = unix_day * 86400 + since_midnight
            if early == late:
                found.add(local - early)
            elif early > late:  # happens twice: the first only for a fixed-hour job
                found.update([local - early] if fixed else [local - early, local - late])
            elif fixed:  # in a gap: at its end, the first wall time that exists
                later = wall + timedelta(minutes=1)
                while exists(later, 0) is None:
                    later += timedelta(minutes=1)
                found.add(exists(later, 0))
    return sorted(t for t in found if low <= t < high)


def test_the_oracle_knows_the_readmes_examples():
    ny = "America/New_York"
    assert oracle(
        "30 2 * * *", ny, datetime(2027, 3, 14, tzinfo=UTC), datetime(2027, 3, 15, tzinfo=UTC)
    ) == [datetime(2027, 3, 14, 7, tzinfo=UTC)]
    assert oracle(
        "30 1 * * *", ny, datetime(2027, 11, 7, tzinfo=UTC), datetime(2027, 11, 8, tzinfo=UTC)
    ) == [datetime(2027, 11, 7, 5, 30, tzinfo=UTC)]
    assert (
        len(
            oracle(
                "0 * * * *",
                ny,
                datetime(2027, 11, 7, 4, tzinfo=UTC),
                datetime(2027, 11, 8, 5, tzinfo=UTC),
            )
        )
        == 25
    )


# --- the server -----------------------------------------------------------------------------


@pytest.fixture
async def namespace_client(client: Client) -> Client:
    return await fresh_namespace(client, "every-zone")


def ranges(cron: str, zone: str) -> list[tuple[datetime, datetime]]:
    """The whole five years for a cron that fires at most twice a day, else the days around
    each change."""
    minute, hour = cron.split()[:2]
    sparse = len(_field(minute, 0, 59)) * len(_field(hour, 0, 23)) <= 2
    return [(FIRST, END)] if sparse else windows(zone)


async def test_every_zone_with_an_offset_change_fires_as_the_rules_say(namespace_client):
    """Every zone gets every cron's schedule. One zone of each group with the same offsets
    (`same_offsets`: Europe/Berlin, Europe/Paris ...) is compared over every range; the
    others, whose answers are the same function of the same offsets, over their first
    change's days, which would show a server reading another zone's file."""
    client = namespace_client
    zones = changing_zones()
    tables = {
        f"z{i:03d}-c{j:02d}": {
            "kind": "invoice-reminders",
            "cron": cron,
            "timezone": zone,
            "paused": True,
            "note": "every-zone test: never runs",
        }
        for i, zone in enumerate(zones)
        for j, cron in enumerate(CRONS)
    }
    jobs = parse_catalog(tables)
    first_of_group = {group[0] for group in same_offsets(zones).values()}

    def create(job):
        return lambda: client.create_schedule(
            job.id,
            Schedule(
                action=ScheduleActionStartWorkflow("NeverRuns", id="never", task_queue="never"),
                spec=job.timing.spec(NOW),
                state=ScheduleState(paused=True, note=job.note),
            ),
        )

    def compare(job, start: datetime, end: datetime):
        async def call() -> str | None:
            served = await server_times(client, job.id, start, end)
            intended = oracle_seconds(job.cron, job.timezone, start, end)
            if [int(t.timestamp()) for t in served] == intended:
                return None
            intended = oracle(job.cron, job.timezone, start, end)
            local = tz(job.timezone)
            wrong = sorted(set(served) ^ set(intended))
            day = min(t.astimezone(local).date() for t in wrong)

            def shown(times: list[datetime]) -> list[str]:
                return [
                    str(t.astimezone(local)) for t in times if t.astimezone(local).date() == day
                ]

            return (
                f"{job.cron!r} in {job.timezone}: {len(wrong)} time(s) differ, first on {day}: "
                f"intended {shown(intended)}, server {shown(served)}"
            )

        return call

    def ranges_of(job) -> list[tuple[datetime, datetime]]:
        if job.timezone in first_of_group:
            return ranges(job.cron, job.timezone)
        return windows(job.timezone)[:1]

    await bounded(create(job) for job in jobs)
    checks = [compare(job, a, b) for job in jobs for a, b in ranges_of(job)]
    problems = [p for p in await bounded(checks, limit=8) if p]
    assert len(zones) >= 100 and len(jobs) == len(zones) * len(CRONS)
    assert not problems, f"{len(problems)} of {len(checks)} ranges differ:\n" + "\n".join(
        problems[:30]
    )
