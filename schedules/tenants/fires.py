"""When a runtime schedule fires: its next slot to dispatch, and its next fire times with
DST notes for `next` / preview. Pure functions of the schedule and a given instant, so DST
days years ahead are tested today; every time comes from the schedule's `Timing`
(`timing/`: classic cron's DST rules in the schedule's zone, as for catalog jobs).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from schedules.catalog.times import dst_note
from schedules.tenants.model import Definition

_TICK = timedelta(microseconds=1)


@dataclass(frozen=True)
class FireTime:
    """One fire time: the UTC instant, and what a DST change does to it (None: nothing)."""

    at: datetime
    dst: str | None = None


def next_fire_at(schedule: Definition, now: datetime, timing_since: datetime) -> datetime | None:
    """The next slot to dispatch: the first fire time strictly after max(now, timing_since)
    (an edit never reaches back before the timing in force began). None: no fire time is
    left (past `end_at`)."""
    return schedule.timing.next_after(max(now, timing_since))


def next_fire_times(schedule: Definition, after: datetime, n: int) -> list[FireTime]:
    """The next `n` fire times strictly after `after`, each with its DST note (a spring
    forward that moves or skips it, a fall back that repeats it)."""
    times = schedule.timing.upcoming(after, n)
    found, previous = [], after
    for instant in times:
        found.append(FireTime(instant, dst_note(schedule, instant, previous)))  # type: ignore[arg-type]
        previous = instant
    return found


def is_fire_time(schedule: Definition, instant: datetime) -> bool:
    """Whether `instant` is one of the schedule's fire times (within its bounds)."""
    return schedule.timing.next_after(instant - _TICK) == instant
