"""When a runtime schedule fires: its next slot to dispatch, and its next fire times with
DST notes for `next` / preview. Pure functions of the schedule and a given instant, so DST
days years ahead are tested today; every time comes from the schedule's `Timing`
(`timing/`: classic cron's DST rules in the schedule's zone, as for catalog jobs).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from schedules.catalog.model import JobSpec
from schedules.catalog.times import calendar_notes, dst_note
from schedules.tenants.model import Definition


@dataclass(frozen=True)
class FireTime:
    """One fire time: the UTC instant, what a DST change does to it, and what the
    schedule's business calendar did to it (the slots moved onto it, the closed days
    skipped before it). None: nothing."""

    at: datetime
    dst: str | None = None
    calendar: str | None = None


def next_fire_at(schedule: Definition, now: datetime, timing_since: datetime) -> datetime | None:
    """The next slot to dispatch: the first fire time strictly after max(now, timing_since)
    (an edit never reaches back before the timing in force began). None: no fire time is
    left (past `end_at`)."""
    return schedule.timing.next_after(max(now, timing_since))


def next_fire_times(schedule: Definition | JobSpec, after: datetime, n: int) -> list[FireTime]:
    """The next `n` fire times strictly after `after`, each with its DST note (a spring
    forward that moves or skips it, a fall back that repeats it) and its calendar note
    (`moved from Thu 2026-11-26 09:00 to Wed 2026-11-25: NYSE holiday (...)`). A runtime
    schedule's or a catalog job's: both carry a `Timing` (the dashboard lists both)."""
    times = schedule.timing.upcoming(after, n)
    moved = calendar_notes(schedule, after, times)  # type: ignore[arg-type]
    found, previous = [], after
    for instant in times:
        dst = dst_note(schedule, instant, previous)  # type: ignore[arg-type]
        found.append(FireTime(instant, dst, moved.get(instant)))
        previous = instant
    return found


def due_time(schedule: Definition, slot: datetime) -> datetime | None:
    """When `slot` runs: at its own time, or where the schedule's business calendar moves
    it. None: `slot` is not one of the schedule's slots (within its bounds), or its
    calendar skips it."""
    timing = schedule.timing
    due = timing.run_at(slot)
    return due if due is not None and slot in timing.slots_at(due) else None
