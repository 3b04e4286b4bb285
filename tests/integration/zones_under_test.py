"""The zones the every-zone tests cover, and the server calls they share.

Every IANA zone whose UTC offset changes in 2027-2031 (read from the `tzdata` package's
files, the database of the project and of the test server), one name per distinct zone
file: links and identical zones (`US/Eastern` and `America/New_York`) have the same rules,
so testing one tests all. The legacy POSIX zones are left out: no job may name one.
"""

from __future__ import annotations

import asyncio
import hashlib
import zoneinfo
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, date, datetime, timedelta
from functools import cache
from importlib import resources
from typing import TypeVar

from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.workflowservice.v1 import ListScheduleMatchingTimesRequest
from temporalio.client import Client

from schedules.server.times import list_matching_times
from timing.zones import LEGACY_ZONES

FIRST, END = datetime(2027, 1, 1, tzinfo=UTC), datetime(2032, 1, 1, tzinfo=UTC)
T = TypeVar("T")


@cache
def tz(name: str) -> zoneinfo.ZoneInfo:
    """The zone from the `tzdata` package's own file (not the system's)."""
    with resources.files("tzdata.zoneinfo").joinpath(name).open("rb") as data:
        return zoneinfo.ZoneInfo.from_file(data, key=name)


@cache
def changes(name: str) -> tuple[datetime, ...]:
    """The instants (to the second) in [FIRST, END) at which `name` changes its offset."""
    zone, found = tz(name), []

    def offset(unix: int) -> timedelta | None:
        return datetime.fromtimestamp(unix, zone).utcoffset()

    step = 12 * 3600  # no zone changes its offset twice within twelve hours
    moment, end = int(FIRST.timestamp()), int(END.timestamp())
    current = offset(moment)
    while moment < end:
        following = moment + step
        if offset(following) != current:
            low, high = moment, following  # the old offset at low, the new one at high
            while high - low > 1:
                middle = (low + high) // 2
                low, high = (middle, high) if offset(middle) == current else (low, middle)
            found.append(datetime.fromtimestamp(high, UTC))
            current = offset(following)
        moment = following
    return tuple(found)


@cache
def changing_zones() -> tuple[str, ...]:
    """One name per distinct zone file whose offset changes in [FIRST, END)."""
    names = resources.files("tzdata").joinpath("zones").read_text().split()
    groups: dict[str, list[str]] = {}
    for name in names:
        digest = hashlib.sha256(resources.files("tzdata.zoneinfo").joinpath(name).read_bytes())
        groups.setdefault(digest.hexdigest(), []).append(name)
    chosen = [min(group, key=lambda n: ("/" not in n, n)) for group in groups.values()]
    # The legacy POSIX zones (`CST6CDT` ...) no job may name (`timing.zones.LEGACY_ZONES`).
    return tuple(sorted(name for name in chosen if changes(name) and name not in LEGACY_ZONES))


@cache
def same_offsets(zones: tuple[str, ...]) -> dict[tuple, list[str]]:
    """Zones grouped by their UTC offsets over the five years: the offset at the start and
    every change with its new offset. The server's calendar matching reads nothing else of
    a zone (Go's `time.Date` and wall clock are functions of the offset at each instant),
    so the zones of a group answer alike for alike specs."""
    groups: dict[tuple, list[str]] = {}
    for zone in zones:
        key = (
            FIRST.astimezone(tz(zone)).utcoffset(),
            tuple((c, c.astimezone(tz(zone)).utcoffset()) for c in changes(zone)),
        )
        groups.setdefault(key, []).append(zone)
    return groups


def change_days(name: str) -> list[tuple[date, date]]:
    """Local date ranges around each change: the day before to the day after."""
    zone, found = tz(name), []
    for moment in changes(name):
        before = (moment - timedelta(minutes=1)).astimezone(zone).date()
        after = moment.astimezone(zone).date()
        low, high = min(before, after) - timedelta(days=1), max(before, after) + timedelta(days=1)
        if found and low <= found[-1][1]:
            found[-1] = (found[-1][0], high)
        else:
            found.append((low, high))
    return found


def day_start(day: date, name: str) -> datetime:
    """The first instant of local `day` (UTC), wherever midnight falls."""
    moment = datetime(day.year, day.month, day.day, tzinfo=UTC) - timedelta(hours=15)
    while moment.astimezone(tz(name)).date() < day:
        moment += timedelta(minutes=15)
    return moment


def windows(name: str) -> list[tuple[datetime, datetime]]:
    """`[start, end)` instants of the local days around each change."""
    return [
        (day_start(low, name), day_start(high + timedelta(days=1), name))
        for low, high in change_days(name)
    ]


def _timestamp(instant: datetime) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(instant)
    return stamp


async def server_times(
    client: Client, schedule_id: str, start: datetime, end: datetime
) -> list[datetime]:
    """What the server lists for the schedule in `[start, end)`, every page of it."""
    found: list[datetime] = []
    after = start - timedelta(seconds=1)
    while True:
        response = await list_matching_times(
            client,
            ListScheduleMatchingTimesRequest(
                namespace=client.namespace,
                schedule_id=schedule_id,
                start_time=_timestamp(after),
                end_time=_timestamp(end - timedelta(seconds=1)),
            ),
        )
        page = [t.ToDatetime(tzinfo=UTC) for t in response.start_time]
        found += page
        if len(page) < 1000:
            return found
        after = page[-1]


async def bounded(calls: Iterable[Callable[[], Awaitable[T]]], limit: int = 32) -> list[T]:
    """Run the calls, `limit` at a time; results in order."""
    gate = asyncio.Semaphore(limit)

    async def one(call: Callable[[], Awaitable[T]]) -> T:
        async with gate:
            return await call()

    return list(await asyncio.gather(*(one(c) for c in calls)))
