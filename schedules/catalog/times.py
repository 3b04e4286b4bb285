"""Fire times as operators read them: in local time and UTC, with DST notes; times they type.

Pure functions of the job and the clock (passed in), so DST changes years ahead are tested
today. When a job fires is its `Timing`'s business (`timing.value`: classic cron DST rules;
interval jobs every `interval` from the Unix epoch, as Temporal's interval specs:
`job.timing.upcoming`, `job.timing.fire_times`); this module only names and explains them.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from schedules.catalog.durations import format_duration
from schedules.catalog.model import JobSpec
from timing import TICK, Timing, zone
from timing.zones import changes

_DAY = timedelta(days=1)
_FAR = datetime(2101, 1, 1, tzinfo=UTC)  # Temporal's calendars match no later year
_FIRST_YEAR = 1970


# --- DST notes ----------------------------------------------------------------------------


def _clock(value: datetime | time) -> str:
    # Formatted by hand: strftime is the slowest part of a dashboard row's times.
    if value.second == 0:
        return f"{value.hour:02d}:{value.minute:02d}"
    return f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}"


def _name_times(times: list[datetime]) -> str:
    if len(times) == 1:
        return f"{_clock(times[0])} does not exist"
    if len(times) == 2:
        return f"{_clock(times[0])} and {_clock(times[1])} do not exist"
    return f"{_clock(times[0])} to {_clock(times[-1])} ({len(times)} times) do not exist"


def _skipped(job: JobSpec, gap_start: datetime, gap_end: datetime) -> list[datetime]:
    """The naive local times in [gap_start, gap_end) that the job's cron names."""
    cron = job.timing.expression
    assert cron is not None
    return [
        local
        for day in cron.matching_days(gap_start.date(), gap_end.date())
        for h, m, s in cron.times
        if gap_start <= (local := datetime(day.year, day.month, day.day, h, m, s)) < gap_end
    ]


def dst_note(job: JobSpec, instant: datetime, previous: datetime) -> str | None:
    """What a DST change does to the run of `job` at `instant` (UTC), or None.

    `previous` is the fire time before it (or the time the listing starts from): local
    times that a spring-forward change skipped between the two are reported on this run.
    """
    if job.cron is None:
        return None  # interval jobs run on elapsed time; the zone does not move them
    tz = zone(job.timezone)
    fixed = job.timing.fixed_hour
    local = instant.astimezone(tz)
    wall = local.replace(tzinfo=None)
    first = wall.replace(tzinfo=tz, fold=0)
    if first.utcoffset() != wall.replace(tzinfo=tz, fold=1).utcoffset():
        # A wall time the fall-back change repeats (a real instant is never in a gap).
        if fixed:
            return f"fall back: runs once, at the first {_clock(wall)} ({first.tzname()})"
        which = "second" if local.fold else "first"
        return f"fall back: {_clock(wall)} happens twice; this is the {which} ({local.tzname()})"
    for change in changes(job.timezone, previous + TICK, instant + TICK):
        if change.after <= change.before:
            continue  # a fall-back change skips nothing
        skipped = _skipped(job, *change.span)
        if not skipped:
            continue
        if fixed and instant == change.at:
            return f"spring forward: {_name_times(skipped)}, runs at {_clock(wall)}"
        if not fixed:
            return f"spring forward: {_name_times(skipped)}, skipped"
    return None


# --- calendar notes -----------------------------------------------------------------------


def calendar_notes(job: JobSpec, after: datetime, times: list[datetime]) -> dict[datetime, str]:
    """What the job's business calendar did to each of `times` (its fire times from
    `after` on): the slots moved onto it (`moved from Fri 2026-12-25 09:00 to Mon
    2026-12-28: NYSE holiday (Christmas Day)`) and, under `on_holiday = "skip"`, the
    non-business days skipped since the fire time before it. Empty without a calendar."""
    grid = job.timing.grid
    if grid is None or not times:
        return {}
    notes: dict[datetime, list[str]] = {}
    for fire in job.timing.fires(times[0], times[-1] + TICK):
        if fire.moved:
            notes.setdefault(fire.at, []).append(fire.moved)
    if grid.rule.on_holiday == "skip":
        tz = zone(job.timezone)
        previous = after.astimezone(tz).date()
        for instant in times:
            day = instant.astimezone(tz).date()
            closed = []
            while previous < day:
                if not grid.rule.is_business(previous) and grid.slots_of(previous):
                    closed.append(grid.skipped_text(previous))
                previous += timedelta(days=1)
            if closed:
                notes.setdefault(instant, []).extend(closed)
    if grid.rule.on_early_close == "skip":
        for slot, text in _early_skips(job.timing, after, times[-1]):
            at = next((t for t in times if t > slot), None)
            if at is not None:
                notes.setdefault(at, []).append(text)
    return {at: "; ".join(lines) for at, lines in notes.items()}


def _early_skips(timing: Timing, start: datetime, end: datetime) -> list[tuple[datetime, str]]:
    """(the last slot, why) of each early-close day in `[start, end]` whose slots after the
    close do not run (`on_early_close = skip`): one line a day, on its last dropped slot."""
    grid = timing.grid
    if grid is None or grid.rule.on_early_close != "skip":
        return []
    tz = zone(timing.timezone)
    day, last = start.astimezone(tz).date(), end.astimezone(tz).date()
    found = []
    while day <= last:
        if grid.rule.short_session(day) is not None:
            dropped = [t for t in grid.slots_of(day) if start <= t <= end and grid.due(t) is None]
            if dropped:
                first, final = (t.astimezone(tz) for t in (dropped[0], dropped[-1]))
                span = f"{first:%H:%M}" if first == final else f"{first:%H:%M} to {final:%H:%M}"
                found.append((dropped[-1], f"{span} {grid.early_text(dropped[-1])}"))
        day += _DAY
    return found


def closure_windows(timing: Timing, first: date, last: date) -> list[tuple[date, date]]:
    """Each run of a calendar job's non-business days touching `[first, last]`, with a day
    either side (where its runs stop, move and come back)."""
    if timing.grid is None:
        return []
    windows = [
        (a - _DAY, b + _DAY)
        for year in range(first.year - 1, last.year + 1)
        for a, b in timing.grid.closures(year)
        if b >= first - _DAY and a <= last + _DAY
    ]
    if timing.grid.rule.on_early_close != "keep":  # the short sessions it acts on
        day = first - _DAY
        while day <= last + _DAY:
            if timing.grid.rule.short_session(day) is not None:
                windows.append((day - _DAY, day + _DAY))
            day += _DAY
    return sorted(windows)


def adjustments(timing: Timing, start: datetime, end: datetime) -> list[str]:
    """What a calendar job's calendar does in `[start, end)`: each slot it moves (with
    where), or under `skip` each day it skips."""
    grid = timing.grid
    if grid is None:
        return []
    if grid.rule.on_holiday != "skip":
        notes = [f.moved for f in timing.fires(start, end) if f.moved]
    else:
        first, last = (t.astimezone(zone(timing.timezone)).date() for t in (start, end))
        notes = [
            grid.skipped_text(day)
            for a, b in closure_windows(timing, first, last)
            for day in (a + n * _DAY for n in range(1, (b - a).days))
            if first <= day <= last and grid.slots_of(day) and not grid.rule.is_business(day)
        ]
        if grid.rule.on_early_close == "close":
            notes += [f.moved for f in timing.fires(start, end) if f.moved]
    notes += [text for _, text in _early_skips(timing, start, end)]
    return sorted(notes, key=lambda note: ": weekend" in note)  # holidays first


# --- reading and showing times ------------------------------------------------------------


def parse_time(text: str, timezone: str, now: datetime) -> datetime:
    """An operator's time as a UTC instant: "now", an ISO date, or an ISO date and time.

    A time without a UTC offset (and a bare date, read as its midnight) is in the job's
    time zone. Raises ValueError with the text it could not read.
    """
    value = text.strip()
    if value.lower() == "now":
        return now.astimezone(UTC)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            f"{text[:80]!r} is not a time like 2026-11-20, 2026-11-20T02:30 or 2026-11-20T02:30:00Z"
        ) from None
    # Temporal's calendars match no later year, and no job ran before 1970.
    if not _FIRST_YEAR <= parsed.year <= _FAR.year - 1:
        raise ValueError(
            f"{text!r} is outside the years {_FIRST_YEAR} to {_FAR.year - 1} that jobs run in"
        )
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=zone(timezone))
    return parsed.astimezone(UTC)


def utc_text(instant: datetime) -> str:
    """`2027-03-14T07:00:00Z`."""
    return instant.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def catalog_value(value: Any) -> Any:
    """A value of a dumped catalog entry as the catalog file says it: durations as `15m`,
    instants in UTC (`utc_text`), inside dicts and lists too; anything else as it is."""
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, datetime):
        return utc_text(value)
    if isinstance(value, dict):
        return {k: catalog_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [catalog_value(v) for v in value]
    return value


def local_text(instant: datetime, timezone: str) -> str:
    """`2027-03-14 03:00 EDT`: the wall-clock time in `timezone` with its abbreviation."""
    local = instant.astimezone(zone(timezone))
    return f"{local.date().isoformat()} {_clock(local)} {local.tzname()}"


def local_iso(instant: datetime, timezone: str) -> str:
    """`2027-03-14T03:00:00-04:00`."""
    return instant.astimezone(zone(timezone)).isoformat(timespec="seconds")


def schedule_text(job: JobSpec) -> str:
    """`30 2 * * *` or `every 15m`."""
    return job.cron if job.cron else f"every {format_duration(job.interval or timedelta(0))}"
