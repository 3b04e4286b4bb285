"""A job's fire times as UTC instants, with classic cron's DST rules, for a given `now`.

Pure functions of the cron text, the time zone and the bounds, so DST years ahead can be
tested today. The semantics are the project's (DESIGN.md, "Time zones and DST"):

- a fixed-hour job whose local time does not exist (spring forward) fires once, at the first
  valid instant after the gap;
- a fixed-hour job in the repeated hour (fall back) fires once, at the first occurrence;
- a job with a wildcard or stepped hour (`*`, `*/2`, `0-23/3`) fires on real elapsed time:
  local times in the gap do not happen, local times in the repeated hour happen twice.

Cron text is read as Temporal reads it: 5 fields (minute hour day month weekday), 6 fields
(the same plus a year), 7 fields (second first, year last), or an `@daily`-style alias.
Interval jobs fire every `interval` counted from the Unix epoch, in UTC, as Temporal's
interval specs do.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from croniter import CroniterBadDateError, croniter

from timing.zones import ZoneInfo

# Wall-clock slack around the bounds: covers every real DST shift and offset change.
_MARGIN = timedelta(hours=3)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _croniter(cron: str, start: datetime) -> croniter:
    fields = cron.split()
    if len(fields) == 6:  # Temporal's sixth field is a year; croniter's 7-field form has one
        return croniter(" ".join(["0", *fields]), start, second_at_beginning=True)
    return croniter(cron, start, second_at_beginning=len(fields) == 7)


def fixed_hour(cron: str) -> bool:
    """Whether the cron names its hours outright (classic cron's "fixed-time" jobs)."""
    hour = _croniter(cron, datetime(2001, 1, 1)).expressions[1]
    return "*" not in hour and "/" not in hour


def _wall(instant: datetime, zone: ZoneInfo) -> datetime:
    return instant.astimezone(zone).replace(tzinfo=None)


def _gap_end(before: datetime, after: datetime, zone: ZoneInfo) -> datetime:
    """The transition instant between `before` (old offset) and `after` (new offset)."""
    target = after.astimezone(zone).utcoffset()
    lo, hi = 0, int((after - before).total_seconds())
    while lo < hi:  # smallest offset in seconds at which the new UTC offset is in force
        mid = (lo + hi) // 2
        if (before + timedelta(seconds=mid)).astimezone(zone).utcoffset() == target:
            hi = mid
        else:
            lo = mid + 1
    return before + timedelta(seconds=lo)


def instants(local: datetime, zone: ZoneInfo, fixed: bool) -> list[datetime]:
    """The UTC instants at which the naive local time `local` fires in `zone`."""
    first = local.replace(tzinfo=zone, fold=0).astimezone(UTC)
    second = local.replace(tzinfo=zone, fold=1).astimezone(UTC)
    if first == second:
        return [first]
    if first < second:  # repeated (fall back): fold=0 is the earlier occurrence
        return [first] if fixed else [first, second]
    # Does not exist (spring forward): fold=0 used the old offset and landed after the gap.
    return [_gap_end(second, first, zone)] if fixed else []


def _cron_times_back(cron: str, timezone: str, end: datetime) -> Iterator[datetime]:
    """Fire times before `end`, newest first (within a few hours' reordering at DST)."""
    zone = ZoneInfo(timezone)
    fixed = fixed_hour(cron)
    it = _croniter(cron, _wall(end, zone) + _MARGIN)
    while True:
        try:
            local = it.get_prev(datetime)
        except CroniterBadDateError:  # no earlier match at all (e.g. a future year only)
            return
        for instant in instants(local, zone, fixed):
            if instant < end:
                yield instant


def fire_times(
    cron: str | None,
    timezone: str,
    start: datetime | None,
    end: datetime,
    *,
    interval: timedelta | None = None,
    limit: int | None = None,
) -> list[datetime]:
    """The fire times in `[start, end)`, oldest first; with `limit`, only the newest `limit`.

    Give `cron` (read in `timezone`) or `interval`. `start=None` needs a `limit`.
    """
    if start is None and limit is None:
        raise ValueError("fire_times needs a start or a limit")
    if limit is not None and limit <= 0:
        return []
    if interval is not None:
        return _interval_times(interval, start, end, limit)
    if cron is None:
        raise ValueError("fire_times needs a cron or an interval")
    zone = ZoneInfo(timezone)
    found: set[datetime] = set()
    for instant in _cron_times_back(cron, timezone, end):
        if start is not None and instant < start:
            # Offsets shift local order by at most _MARGIN: look that far past the bound.
            if _wall(instant, zone) < _wall(start, zone) - _MARGIN:
                break
            continue
        if limit is not None and len(found) >= limit:
            # Going back in time: stop once past the limit-th newest by more than any
            # offset shift could reorder.
            if instant < sorted(found)[-limit] - _MARGIN:
                break
        found.add(instant)
    ordered = sorted(found)
    return ordered[-limit:] if limit is not None else ordered


def _interval_times(
    every: timedelta, start: datetime | None, end: datetime, limit: int | None
) -> list[datetime]:
    last = (end - _EPOCH - timedelta.resolution) // every  # the newest n with epoch + n*every < end
    first = 0 if start is None else -((_EPOCH - start) // every)  # ceil((start - epoch) / every)
    if limit is not None:
        first = max(first, last - limit + 1)
    return [_EPOCH + n * every for n in range(first, last + 1)]


def next_fire_time(
    cron: str | None,
    timezone: str,
    after: datetime,
    *,
    interval: timedelta | None = None,
) -> datetime | None:
    """The first fire time strictly after `after` (None if the cron never fires again)."""
    if interval is not None:
        return _EPOCH + ((after - _EPOCH) // interval + 1) * interval
    if cron is None:
        raise ValueError("next_fire_time needs a cron or an interval")
    zone = ZoneInfo(timezone)
    fixed = fixed_hour(cron)
    it = _croniter(cron, _wall(after, zone) - _MARGIN)
    best: datetime | None = None
    while True:
        try:
            local = it.get_next(datetime)
        except CroniterBadDateError:  # no later match at all (e.g. a past year only)
            return best
        if best is not None and local > _wall(best, zone) + _MARGIN:
            return best
        for instant in instants(local, zone, fixed):
            if instant > after and (best is None or instant < best):
                best = instant
