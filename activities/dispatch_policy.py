"""The dispatcher's policy, pure: which of a runtime schedule's due slots run at a tick
(`decide_slots`, its catch-up policy), which a tenant's budget lets run (`within`), and a
row's business calendar (`calendar_rule`). `activities.dispatch` applies it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache

from activities.models import Origin
from activities.tenant_limits import Budget
from timing import Timing
from timing.business import BusinessCalendar, CalendarRule

_TICK = timedelta(microseconds=1)

# A slot dispatched within this of its time runs as `scheduled`; later, it was missed
# (the dispatcher was down) and its schedule's catch-up policy decides.
GRACE = timedelta(minutes=2)
# Missed slots a policy looks at, at most, per schedule and tick (older ones are beyond
# every policy's reach, as for catalog jobs: `activities.catchup.MAX_CONSIDERED`).
MAX_CONSIDERED = 1000


@dataclass(frozen=True)
class Slots:
    """One schedule's decision at a tick: slots to run (with their origin), missed slots
    recorded skipped (with the reason), the next slot to dispatch, and when each slot a
    business calendar moved is due (its fire time; the others are due at their own)."""

    run: list[tuple[datetime, Origin]]
    skip: list[tuple[datetime, str]]
    next_fire_at: datetime | None
    due: Mapping[datetime, datetime] = field(default_factory=dict)


def decide_slots(
    timing: Timing,
    catchup: str,
    next_fire_at: datetime,
    timing_since: datetime | None,
    now: datetime,
    max_missed: int | None = None,
) -> Slots:
    """Pure policy: which of the fire times in [next_fire_at, now] run (never one after
    `now`, never one before `timing_since`: an edit does not invent missed runs).

    The newest due slot is on time when `now` is within `GRACE` of it; the others were
    missed. As for catalog jobs (`activities.catchup.decide`): `skip` runs only an on-time
    slot; `latest` runs the newest once; `all` runs the `max_missed` newest missed ones,
    oldest first, and the on-time slot besides. Every due slot not run is recorded skipped
    with the reason."""
    low = max(next_fire_at, timing_since) if timing_since is not None else next_fire_at
    due = timing.fire_times(low, now + _TICK, limit=MAX_CONSIDERED, newest=True)
    following = timing.next_after(now)
    if not due:
        return Slots([], [], following)
    newest = due[-1]
    on_time = now - newest <= GRACE

    def origin(slot: datetime) -> Origin:
        return "scheduled" if on_time and slot == newest else "catch-up"

    if catchup == "skip":
        run = [newest] if on_time else []
        why = "missed: catch-up policy 'skip' runs no missed time"
    elif catchup == "latest":
        run = [newest]
        why = f"missed: catch-up policy 'latest' ran only {newest:%Y-%m-%dT%H:%M:%SZ}"
    else:
        keep = max(max_missed or 1, 1)
        missed = [slot for slot in due if not (on_time and slot == newest)]
        run = missed[-keep:] + ([newest] if on_time else [])
        why = f"missed: beyond catch-up policy 'all' (max_missed {keep})"
    ran = set(run)
    decided = Slots(
        [(slot, origin(slot)) for slot in run],
        [(slot, why) for slot in due if slot not in ran],
        following,
    )
    return (
        decided if timing.calendar is None else _as_slots(timing, decided, low, timing_since, now)
    )


def _as_slots(
    timing: Timing, decided: Slots, low: datetime, since: datetime | None, now: datetime
) -> Slots:
    """A schedule with a business calendar: each decided fire time as the slots its
    calendar puts there, unadjusted (the intents' and the ledger's keys), none from before
    its timing took effect, each due at that fire time: a `following` slot runs once its
    fire time has come, a `preceding` one before its own time, both under their own."""
    slots: dict[datetime, list[datetime]] = {}
    for fire in timing.fires(low, now + _TICK, limit=MAX_CONSIDERED, newest=True):
        if since is None or fire.slot >= since:
            slots.setdefault(fire.at, []).append(fire.slot)
    return Slots(
        [(slot, origin) for at, origin in decided.run for slot in slots.get(at, [])],
        [(slot, why) for at, why in decided.skip for slot in slots.get(at, [])],
        decided.next_fire_at,
        {slot: at for at, _ in decided.run for slot in slots.get(at, []) if slot != at},
    )


def within(slots: Slots, budget: Budget) -> Slots | None:
    """The slots a tenant's budget lets run (None: none, the schedule is deferred), taken
    from the budget. A catch-up of more slots than the budget runs its oldest (whole fire
    times), and the schedule's next slot is the fire time after the last one run: the rest
    are decided at a later tick, under the policy."""
    left = budget.left()
    if len(slots.run) <= left:
        budget.taken += len(slots.run)
        return slots
    cut = left

    def at(i: int) -> datetime:
        return slots.due.get(slots.run[i][0], slots.run[i][0])

    while cut > 0 and at(cut - 1) == at(left):
        cut -= 1
    if cut == 0:
        return None
    budget.taken += cut
    return Slots(slots.run[:cut], slots.skip, at(cut - 1) + _TICK, slots.due)


@lru_cache(maxsize=1024)
def calendar_rule(definition: str | None, on_holiday: str | None) -> CalendarRule | None:
    """A runtime schedule's business calendar from its row (the definition as JSON text)."""
    if definition is None:
        return None
    return CalendarRule(
        calendar=BusinessCalendar.model_validate_json(definition), on_holiday=on_holiday or "skip"
    )
