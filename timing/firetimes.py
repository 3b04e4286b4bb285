"""A job's intended fire times as UTC instants, with classic cron's DST rules.

Pure functions of the parsed cron (`timing.cron`), the zone (`timing.zones`) and the bounds,
so DST years ahead are tested today. The semantics are the project's, stated here (tested in
`tests/unit/test_firetimes.py`):

- a fixed-hour job whose local time does not exist (spring forward) fires once, at the first
  valid instant after the gap (several such times of one day collapse into that one run);
- a fixed-hour job in the repeated span (fall back) fires once, at the first occurrence;
- a job with a wildcard or stepped hour (`*`, `*/2`, `0-23/3`) fires on real elapsed time:
  local times in the gap do not happen, local times in the repeated span happen twice.

Interval jobs fire every `interval` counted from the Unix epoch, in UTC, as Temporal's
interval specs do.

The times of one local day are computed together: on a day no offset change touches, they
are the day's wall-clock times moved by its one offset; only the days of a change are
resolved time by time. Fire times of successive days never interleave, so a range is read
day by day in either direction and stops as soon as it has what it needs.

These take the parsed cron (`timing.cron.Cron`), never its text: `timing.Timing` is the API,
and it parses its cron once.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta

from timing.cron import LAST_YEAR, Cron
from timing.zones import ZoneInfo, changes_in_year, plain_offset, zone

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_DAY = timedelta(days=1)
# Temporal's calendars match no year after 2100: nothing is looked for past it.
_FAR_DAY = date(LAST_YEAR + 1, 1, 2)
_NEAR_DAY = date(1970, 1, 1)


def instants(local: datetime, tz: ZoneInfo, fixed: bool) -> list[datetime]:
    """The UTC instants at which the naive local time `local` fires in zone `tz`."""
    first = local.replace(tzinfo=tz, fold=0).astimezone(UTC)
    second = local.replace(tzinfo=tz, fold=1).astimezone(UTC)
    if first == second:
        return [first]
    if first < second:  # repeated (fall back): fold=0 is the earlier occurrence
        return [first] if fixed else [first, second]
    # Does not exist (spring forward): the first valid instant after the gap is the change.
    if not fixed:
        return []
    for year in sorted({first.year, second.year}):
        for change in changes_in_year(tz.key, year):
            low, high = change.span
            if low <= local < high:
                return [change.at]
    raise AssertionError(f"{local} in {tz.key}: no offset change skips it")  # pragma: no cover


def day_fires(cron: Cron, zone_name: str, day: date) -> list[datetime]:
    """The fire times (UTC, ascending, distinct) of the local date `day`, which the cron
    must match (`Cron.matches_day`)."""
    offset = plain_offset(zone_name, day)
    if offset is not None:
        midnight = datetime(day.year, day.month, day.day, tzinfo=UTC) - offset
        return [midnight + timedelta(seconds=s) for s in cron.day_seconds]
    tz = zone(zone_name)
    found: set[datetime] = set()
    for hour, minute, second in cron.times:
        local = datetime(day.year, day.month, day.day, hour, minute, second)
        found.update(instants(local, tz, cron.fixed_hour))
    return sorted(found)


def _local_date(instant: datetime, zone_name: str) -> date:
    return instant.astimezone(zone(zone_name)).date()


def cron_fires(
    cron: Cron, zone_name: str, start: datetime, end: datetime, limit: int | None = None
) -> list[datetime]:
    """Fire times in `[start, end)`, oldest first; at most `limit`."""
    found: list[datetime] = []
    for instant in _forward(cron, zone_name, start):
        if instant >= end or (limit is not None and len(found) >= limit):
            break
        found.append(instant)
    return found


def cron_fires_newest(
    cron: Cron, zone_name: str, start: datetime | None, end: datetime, limit: int
) -> list[datetime]:
    """The newest `limit` fire times in `[start, end)` (start None: no lower bound),
    oldest first."""
    found: list[datetime] = []
    for instant in _backward(cron, zone_name, end):
        if (start is not None and instant < start) or len(found) >= limit:
            break
        found.append(instant)
    return found[::-1]


def _day_fires_from(cron: Cron, zone_name: str, day: date, start: datetime) -> Iterator[datetime]:
    """`day_fires` of `day` at or after `start`, made one at a time: on a day no offset
    change touches, from the first of the day's times at or after `start` (bisected), so a
    page that shows a `*/5` schedule's next three times does not make its day's 288."""
    offset = plain_offset(zone_name, day)
    if offset is None:
        yield from (instant for instant in day_fires(cron, zone_name, day) if instant >= start)
        return
    midnight = datetime(day.year, day.month, day.day, tzinfo=UTC) - offset
    seconds = cron.day_seconds
    first = bisect_left(seconds, math.ceil((start - midnight).total_seconds()))
    for second in seconds[first:]:
        yield midnight + timedelta(seconds=second)


def _forward(cron: Cron, zone_name: str, start: datetime) -> Iterator[datetime]:
    """Every fire time at or after `start`, ascending."""
    first = max(_local_date(start, zone_name) - _ONE_DAY, _NEAR_DAY)
    last: datetime | None = None
    for day in cron.matching_days(first, _FAR_DAY):
        for instant in _day_fires_from(cron, zone_name, day, start):
            if instant != last:
                last = instant
                yield instant


def _day_fires_before(cron: Cron, zone_name: str, day: date, end: datetime) -> Iterator[datetime]:
    """`day_fires` of `day` before `end`, newest first, made one at a time (as
    `_day_fires_from`, backwards)."""
    offset = plain_offset(zone_name, day)
    if offset is None:
        yield from (i for i in reversed(day_fires(cron, zone_name, day)) if i < end)
        return
    midnight = datetime(day.year, day.month, day.day, tzinfo=UTC) - offset
    seconds = cron.day_seconds
    for second in reversed(seconds[: bisect_left(seconds, (end - midnight).total_seconds())]):
        yield midnight + timedelta(seconds=second)


def _backward(cron: Cron, zone_name: str, end: datetime) -> Iterator[datetime]:
    """Every fire time before `end`, descending."""
    last = min(_local_date(end, zone_name) + _ONE_DAY, _FAR_DAY)
    previous: datetime | None = None
    for day in cron.matching_days(_NEAR_DAY, last, reverse=True):
        for instant in _day_fires_before(cron, zone_name, day, end):
            if instant != previous:
                previous = instant
                yield instant


def next_cron_fire(cron: Cron, zone_name: str, after: datetime) -> datetime | None:
    """The first fire time strictly after `after` (None: it never fires again)."""
    for instant in _forward(cron, zone_name, after):
        if instant > after:
            return instant
    return None


def interval_fires(
    every: timedelta, start: datetime | None, end: datetime, limit: int | None, newest: bool
) -> list[datetime]:
    """Interval fire times in `[start, end)`: epoch + n * every."""
    last = (end - EPOCH - timedelta.resolution) // every  # the newest n with epoch + n*every < end
    first = 0 if start is None else -((EPOCH - start) // every)  # ceil((start - epoch) / every)
    if limit is not None:
        if newest:
            first = max(first, last - limit + 1)
        else:
            last = min(last, first + limit - 1)
    return [EPOCH + n * every for n in range(first, last + 1)]


def next_interval_fire(every: timedelta, after: datetime) -> datetime:
    return EPOCH + ((after - EPOCH) // every + 1) * every
