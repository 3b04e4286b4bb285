"""The one time zone database: IANA zones loaded from the `tzdata` package, never the system's.

Python's `zoneinfo.ZoneInfo(name)` reads the first copy it finds on `zoneinfo.TZPATH` (the
system's `/usr/share/zoneinfo`) and falls back to the `tzdata` package only when there is
none, so the same code gives other UTC offsets on machines with other system files (here:
system 2025b, tzdata 2026f, which disagree on Vancouver, Havana and Casablanca in 2027-2031).
`zone(name)` always loads the package's file, so every computation of the project (fire
times, Temporal calendars, `next`, `verify`, catch-up, the jobs' own windows) uses the one
database named by `TZDATA_VERSION`, whatever the machine has. An update is a dependency
change (`pip install -U tzdata`), visible in `schedules describe` and `schedules verify`.

Loading by file, not by resetting `zoneinfo`'s search path at each entry point: a path reset
changes the process for every library and depends on running before any zone is loaded;
this depends on nothing but the call.

The Temporal server reads its own database (Go's `time.LoadLocation`: `$ZONEINFO`, then
the system's files). Calendars compiled to UTC do not depend on it; calendars left in the
job's zone do, which `schedules verify` checks on the server. `zoneinfo_dir()` is what the
local dev server gets as `ZONEINFO`, so the local stack agrees with this database.
"""

from __future__ import annotations

import bisect
import difflib
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import cache, cached_property, lru_cache
from importlib import resources
from pathlib import Path
from zoneinfo import ZoneInfo as _SystemZoneInfo
from zoneinfo import ZoneInfoNotFoundError

import tzdata

TZDATA_VERSION: str = tzdata.IANA_VERSION
"""The IANA release of the time zone database every computation uses, e.g. `2026f`."""

TICK = timedelta(microseconds=1)
"""The smallest step between two datetimes: `end + TICK` makes an exclusive end take in
`end` itself, `start - TICK` makes an inclusive start of a range read as `(start, end]`."""

# No zone changes its UTC offset twice within twelve hours (the closest in the database's
# future rules: weeks apart), so sampling every twelve hours finds every change.
_STEP = timedelta(hours=12)


class UnknownZoneError(ZoneInfoNotFoundError, ValueError):
    """A name that is not an IANA time zone of the `tzdata` package."""


class ZoneInfo(_SystemZoneInfo):
    """`zoneinfo.ZoneInfo`, always read from the `tzdata` package: `ZoneInfo(name)` is
    `zone(name)`. Code written against `zoneinfo` switches database by its import line."""

    def __new__(cls, key: str) -> ZoneInfo:
        return zone(key)

    def __reduce__(self) -> tuple:
        # Pickled (and deep-copied) by name, back to the package's zone: the default
        # refuses a zone read from a file.
        return (zone, (self.key,))


__all__ = [
    "LEGACY_ZONES",
    "TZDATA_VERSION",
    "ZoneInfo",
    "ZoneInfoNotFoundError",
    "zone",
    "zone_problem",
]


@cache
def zone_names() -> frozenset[str]:
    """Every zone (and link) name the package has, e.g. `Europe/London`, `US/Eastern`."""
    listed = resources.files("tzdata").joinpath("zones").read_text(encoding="utf-8")
    return frozenset(line.strip() for line in listed.splitlines() if line.strip())


# Legacy names tzdata keeps for POSIX compatibility: a job written with one almost always
# means a region's local time, which they do not follow (EST never observes daylight saving;
# EST5EDT follows today's US rules, not New York's history or future). Each is refused,
# naming the region zone meant and, for a fixed offset, the `Etc/` name that says so.
LEGACY_ZONES: dict[str, tuple[str, str | None]] = {
    "EST": ("America/New_York", "Etc/GMT+5"),
    "MST": ("America/Denver", "Etc/GMT+7"),
    "HST": ("Pacific/Honolulu", "Etc/GMT+10"),
    "EST5EDT": ("America/New_York", None),
    "CST6CDT": ("America/Chicago", None),
    "MST7MDT": ("America/Denver", None),
    "PST8PDT": ("America/Los_Angeles", None),
}


def zone_problem(name: str, *, legacy: bool = False) -> str | None:
    """Why `name` is refused as a job's time zone, as one line naming it (None: it is a
    zone of the package). An unknown name gets the closest known one ("did you mean");
    with `legacy` False (what a new job or schedule may name), a legacy zone is refused
    too (`LEGACY_ZONES`)."""
    if not isinstance(name, str) or name not in zone_names():
        shown = name[:80] if isinstance(name, str) else name
        close = closest_zone(name) if isinstance(name, str) else None
        hint = f" (did you mean {close!r}?)" if close else ""
        return f"is not a known IANA time zone: {shown!r}{hint}"
    if not legacy and name in LEGACY_ZONES:
        region, fixed = LEGACY_ZONES[name]
        offset = f"; for a fixed offset give {fixed!r}" if fixed else ""
        return (
            f"{name!r} is a legacy POSIX zone, not a region's local time: for local time give "
            f"the region's zone, e.g. {region!r}{offset}"
        )
    return None


def closest_zone(name: str) -> str | None:
    """The zone name closest to `name`: the same but for case, the one whose last part it
    is (`london`: `Europe/London`), else the nearest spelling (`Europe/Londn`)."""
    if len(name) > 100:  # no zone name is this long: nothing is close
        return None
    by_case = {known.lower(): known for known in zone_names()}
    wanted = name.strip().replace(" ", "_").lower()
    if wanted in by_case:
        return by_case[wanted]
    by_city = {known.rsplit("/", 1)[-1].lower(): known for known in sorted(zone_names())}
    if "/" not in wanted and wanted in by_city:
        return by_city[wanted]
    found = difflib.get_close_matches(wanted, list(by_case), n=1, cutoff=0.8)
    return by_case[found[0]] if found else None


@cache
def zone(name: str) -> ZoneInfo:
    """The zone `name` from the `tzdata` package (one object per name, like `ZoneInfo`).

    Raises:
        UnknownZoneError: `name` is not one of the package's zones.
    """
    if not isinstance(name, str) or name not in zone_names():
        close = closest_zone(name) if isinstance(name, str) else None
        hint = f"; did you mean {close!r}?" if close else ""
        raise UnknownZoneError(
            f"{name!r} is not a known IANA time zone (tzdata {TZDATA_VERSION}){hint}"
        )
    with resources.files("tzdata.zoneinfo").joinpath(name).open("rb") as data:
        loaded = ZoneInfo.from_file(data, key=name)
    assert isinstance(loaded, ZoneInfo)
    return loaded


def second_occurrence_of(instant: datetime, name: str) -> datetime | None:
    """If `instant` is the second of two instants with the same wall clock time in zone
    `name` (the repeated hour at fall back), the first one; else None."""
    tz = zone(name)
    local = instant.astimezone(tz).replace(tzinfo=None)
    first = local.replace(tzinfo=tz, fold=0).astimezone(instant.tzinfo)
    second = local.replace(tzinfo=tz, fold=1).astimezone(instant.tzinfo)
    return first if first != second and instant == second else None


def zone_bytes(name: str) -> bytes:
    """The zone's TZif file as the package ships it (what a server would read)."""
    zone(name)  # the same refusal for unknown names
    return resources.files("tzdata.zoneinfo").joinpath(name).read_bytes()


def zoneinfo_dir() -> Path:
    """The package's zoneinfo directory: a Go program's `ZONEINFO` for the same database."""
    return Path(str(resources.files("tzdata").joinpath("zoneinfo")))


@dataclass(frozen=True)
class Change:
    """One change of a zone's UTC offset."""

    at: datetime  # the first instant (UTC) with the new offset
    before: timedelta
    after: timedelta

    @cached_property
    def span(self) -> tuple[datetime, datetime]:
        """The naive local times `[low, high)` the change skips (spring) or repeats (fall)."""
        wall = self.at.replace(tzinfo=None)
        low, high = sorted((wall + self.before, wall + self.after))
        return low, high

    @cached_property
    def local_dates(self) -> tuple[date, date]:
        """The first and last local date whose wall clock the change touches."""
        low, high = self.span
        return low.date(), (high - TICK).date()


@lru_cache(maxsize=16384)
def changes_in_year(name: str, year: int) -> tuple[Change, ...]:
    """The offset changes of zone `name` during UTC year `year`, to the second."""
    tz = zone(name)
    found = []
    moment, end = datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
    offset = moment.astimezone(tz).utcoffset()
    while moment < end:
        following = moment + _STEP
        new = following.astimezone(tz).utcoffset()
        if new != offset:
            lo, hi = int(moment.timestamp()), int(following.timestamp())
            while hi - lo > 1:  # the first second with the new offset
                mid = (lo + hi) // 2
                if datetime.fromtimestamp(mid, tz).utcoffset() == new:
                    hi = mid
                else:
                    lo = mid
            assert offset is not None and new is not None
            found.append(Change(datetime.fromtimestamp(hi, UTC), offset, new))
            offset = new
        moment = following
    return tuple(found)


def changes(name: str, start: datetime, end: datetime) -> list[Change]:
    """The offset changes of zone `name` at instants in `[start, end)`."""
    return [
        change
        for year in range(start.astimezone(UTC).year, end.astimezone(UTC).year + 1)
        for change in changes_in_year(name, year)
        if start <= change.at < end
    ]


@lru_cache(maxsize=4096)
def _touched(name: str, year: int) -> frozenset[date]:
    """Local dates of `year` (and its edges) whose wall clock an offset change touches."""
    days = set()
    for utc_year in (year - 1, year, year + 1):
        for change in changes_in_year(name, utc_year):
            first, last = change.local_dates
            day = first
            while day <= last:
                days.add(day)
                day += timedelta(days=1)
    return frozenset(d for d in days if d.year == year)


def plain_offset(name: str, day: date) -> timedelta | None:
    """The one UTC offset of every wall-clock time of local `day`, or None when an offset
    change skips or repeats some of that day's times (then ask `instants` time by time)."""
    if day in _touched(name, day.year):
        return None
    return datetime(day.year, day.month, day.day, 12, tzinfo=zone(name)).utcoffset()


@lru_cache(maxsize=4096)
def offset_changes_between(name: str, first: date, last: date) -> tuple[Change, ...]:
    """The changes whose wall-clock span touches a local date in `[first, last]`."""
    found = []
    for year in range(first.year - 1, last.year + 2):
        for change in changes_in_year(name, year):
            low, high = change.local_dates
            if high >= first and low <= last:
                found.append(change)
    return tuple(found)


class Clock:
    """Fast UTC offsets of one zone, in whole seconds, for code that steps second by second
    (the model of Temporal's calendar matching). Offsets come from `changes_in_year`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._starts: list[int] = []
        self._offsets: list[int] = []
        self._years: tuple[int, int] | None = None
        self._low, self._high, self._last = 1, 0, 0  # the period of the last answer

    def _cover(self, year: int) -> None:
        """Make the offsets of UTC years `year - 1` to `year + 1` (at least) known."""
        if self._years is not None and self._years[0] < year < self._years[1]:
            return
        low, high = year - 1, year + 1
        if self._years is not None:
            low, high = min(low, self._years[0]), max(high, self._years[1])
        tz = zone(self.name)
        first = datetime(low, 1, 1, tzinfo=UTC)
        offset = first.astimezone(tz).utcoffset()
        assert offset is not None
        starts, offsets = [int(first.timestamp())], [int(offset.total_seconds())]
        for y in range(low, high + 1):
            for change in changes_in_year(self.name, y):
                starts.append(int(change.at.timestamp()))
                offsets.append(int(change.after.total_seconds()))
        self._starts, self._offsets, self._years = starts, offsets, (low, high)

    def offset(self, unix: int) -> int:
        """The zone's UTC offset in seconds at instant `unix` (years 1 to 9998)."""
        if self._low <= unix < self._high:  # most lookups fall in the period of the last one
            return self._last
        self._cover(1970 + unix // 31_556_952)  # the year, give or take one
        i = bisect.bisect_right(self._starts, unix) - 1
        self._low = self._starts[i]
        # The last known change may be followed by others not loaded yet: stop there.
        self._high = self._starts[i + 1] if i + 1 < len(self._starts) else self._low
        self._last = self._offsets[i]
        return self._last
