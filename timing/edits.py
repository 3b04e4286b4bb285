"""What an edit of a job's timing would leave behind: the slots it strands.

A business calendar runs a slot away from its own time (`following` after it, `preceding`
before it). An edit takes effect at one instant; from then the new timing fires. A slot the
timing before still owed (its run at or after the edit) whose run under the new timing is
before the edit would be run by neither; so would a slot already past that the new timing
does not run at all. Those are the stranded slots: the edit must decide them (run or drop,
and say so), never lose them (issue 36, item 4). A future slot the new timing does not run
is the edit's own choice, not stranded.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from timing.value import Timing

# A calendar never moves a run more than 31 days (timing/business.py).
MOVE_LIMIT = timedelta(days=32)


@dataclass(frozen=True)
class Strand:
    """A slot an edit strands: `was_due`, its run under the timing before the edit (at or
    after it); `due`, its run under the new timing (before the edit), None if it has none."""

    slot: datetime
    was_due: datetime
    due: datetime | None


def stranded(old: Timing, new: Timing, edited_at: datetime) -> list[Strand]:
    """The slots that an edit from `old` to `new` at `edited_at` strands, oldest first.
    Only a calendar moves a run off its slot, so two timings without one strand nothing."""
    if old.calendar is None and new.calendar is None:
        return []
    found = []
    for fire in old.fires(edited_at, edited_at + MOVE_LIMIT):
        if fire.slot >= edited_at and new.calendar is None:
            continue  # the new timing runs a future slot at its own time, or not at all
        due = _due(new, fire.slot)
        if (due is None and fire.slot < edited_at) or (due is not None and due < edited_at):
            found.append(Strand(fire.slot, fire.at, due))
    return sorted(found, key=lambda s: s.slot)


def _due(timing: Timing, slot: datetime) -> datetime | None:
    """When `timing` runs `slot` (None: it is not one of its slots, or it skips it)."""
    due = timing.run_at(slot)
    if due is None or slot not in timing.slots_at(due):
        return None
    return due
