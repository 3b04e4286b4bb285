"""What a schedule-started run does about the fire times before it that never ran.

Temporal's own catch-up is blunt: after downtime, with overlap SKIP, it starts the *earliest*
missed time inside the catch-up window and drops the rest; if the downtime outlasts the
window it starts nothing. So every scheduled run first looks at the job's record: the fire
times since its last recorded slot that have no row are *missed*, and the job's policy says
which of them run (oldest first) and which are recorded as skipped with the reason:

- `skip`: none of the missed run; this run itself runs only if it is on time.
- `latest`: only the most recent missed time runs.
- `all` with `max_missed: N`: the N most recent missed times run, oldest first, and this
  run's own slot besides when it is on time; older ones are recorded as a catch-up gap
  (alerted by `schedules check`), never silently dropped. The result is the same whichever
  slot Temporal started: the earliest missed one, late, or the next on-time one.

Fixed-time jobs also keep classic cron's promise for the repeated hour at fall back: a
backfilled or late second 01:30 is skipped when the first 01:30 already has a run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, Field
from temporalio import activity

from activities.claim.executions import Clock, utcnow
from activities.common.models import Origin
from activities.common.telemetry import Happened, SkipReason, record_skip
from core.sql import queries
from timing import TICK, Timing
from timing.business import MAX_SHIFT
from timing.zones import ZoneInfo, second_occurrence_of

_Q = queries("activities.catchup", "catchup")

# How far back missed runs are looked for at most, and how many are considered.
LOOKBACK = timedelta(days=31)
MAX_CONSIDERED = 1000
# A run that starts this much after its slot (beyond its jitter) counts as missed for `skip`.
ON_TIME = timedelta(seconds=30)
# A slot this far after its run's start has not come yet: the run does nothing for it. The
# margin covers the clock of a host that triggered a run with its own nominal time.
FUTURE_MARGIN = timedelta(seconds=60)
_AHEAD = timedelta(days=MAX_SHIFT + 1)


class PlanInput(BaseModel):
    job_name: str
    scheduled_at: datetime
    started_at: datetime  # when Temporal started the workflow
    workflow_id: str
    run_id: str
    timing: Timing  # when the job fires, start_at, end_at and jitter included
    catchup: Literal["skip", "latest", "all"] = "latest"
    max_missed: int | None = None
    # When the server applied the job's current timing (see `JobRun.timing_since`); while
    # `timing_pending`, sync has just applied it and not yet stamped that time.
    timing_since: datetime | None = None
    timing_pending: bool = False


class PlanResult(BaseModel):
    run: list[datetime] = Field(default_factory=list)  # slots to run, oldest first
    skipped: int = 0  # missed slots recorded as skipped
    gap: int = 0  # of those, beyond the catch-up cap
    reason: str | None = None  # why this run's own slot does not run, if it does not
    origin: Origin = "scheduled"  # how this run came about (`run_origin`)
    local_time: str = ""  # the slot in the job's time zone, e.g. "2027-03-14 03:00 EDT"
    # A calendar job's fire time runs the slots its business calendar puts there (one
    # moved from a holiday, several onto one day): those slots, oldest first, and what the
    # calendar did. Empty: the fire time is the run's one own slot.
    own: list[datetime] = Field(default_factory=list)
    calendar_note: str | None = None


@dataclass(frozen=True)
class Decision:
    run: list[datetime]
    skip: list[tuple[datetime, str]]
    gap: int
    origin: Origin = "scheduled"
    own: tuple[datetime, ...] = ()  # the slots of the run's own fire time (a calendar job)


def _fmt(instant: datetime) -> str:
    return instant.strftime("%Y-%m-%dT%H:%M:%SZ")


def repeated_hour_reason(slot: datetime, recorded: set[datetime], plan: PlanInput) -> str | None:
    """Why a fixed-time job's second 01:30 (fall back) must not run, if the first one did."""
    if not plan.timing.fixed_hour:
        return None
    timezone = plan.timing.timezone
    first = second_occurrence_of(slot, timezone)
    if first is None or first not in recorded:
        return None
    local = slot.astimezone(ZoneInfo(timezone))
    return (
        f"repeated local time {local:%H:%M} {timezone} (fall back): "
        f"the job already ran at {_fmt(first)}"
    )


def decide(
    slot: datetime, started_at: datetime, missing: Sequence[datetime], plan: PlanInput
) -> Decision:
    """Pure policy: which slots run and which are skipped (with reasons). Unit-testable.

    `missing` holds every fire time no run has covered, the run's own slot included, oldest
    first. The own slot is *on time* when it is the newest of them and Temporal started it
    within `ON_TIME` (plus jitter); every other one is *missed*, the own slot too when
    Temporal started it late (its catch-up after downtime starts the earliest missed time).
    So the decision depends on which times were missed, not on which one Temporal started.
    """
    if list(missing) in ([], [slot]):
        return Decision([slot], [], 0)
    latest = missing[-1]
    on_time = slot == latest and (started_at - slot <= ON_TIME + plan.timing.jitter)
    missed = [s for s in missing if not (on_time and s == slot)]
    if plan.catchup == "skip":
        run = [slot] if on_time else []
        reason = "missed: catch-up policy 'skip' runs no missed time"
        return Decision(run, [(s, reason) for s in missed], 0)
    if plan.catchup == "latest":
        reason = f"missed: catch-up policy 'latest' ran only {_fmt(latest)}"
        return Decision([latest], [(s, reason) for s in missing if s != latest], 0)
    # all: the `max_missed` newest missed times, and the own slot besides when it is on time.
    keep = max(plan.max_missed or 1, 1)
    dropped = missed[: max(len(missed) - keep, 0)]
    run = missed[len(dropped) :] + ([slot] if on_time else [])
    reason = (
        f"catch-up gap: {len(dropped)} missed run(s) beyond max_missed {keep}; "
        f"ran {_fmt(run[0])} to {_fmt(run[-1])}"
    )
    return Decision(run, [(s, reason) for s in dropped], len(dropped))


class CatchupActivities:
    """Plans a scheduled run against the job's record; built by the worker with its pool."""

    def __init__(self, pool: AsyncConnectionPool, clock: Clock = utcnow) -> None:
        self.pool = pool
        self.clock = clock

    @activity.defn
    async def plan_run(self, plan: PlanInput) -> PlanResult:
        """Decide which slots this run covers; record the missed ones it will not run."""
        future = future_slot_reason(plan)
        if future is not None:
            return not_yet(plan, future)
        async with self.pool.connection() as conn, conn.transaction():
            result, decision = await plan_in(conn, plan, self.clock())
        planned(plan, decision)
        return result


async def plan_in(
    conn: AsyncConnection, plan: PlanInput, now: datetime
) -> tuple[PlanResult, Decision]:
    """In `conn`'s transaction, decide which slots the run covers and record the missed
    ones it will not run (skipped, with the reason). Call `planned` once committed."""
    slot = plan.scheduled_at
    cur = await conn.execute(
        _Q["last_recorded"], {"job_name": plan.job_name, "now": now, "run_id": plan.run_id}
    )
    (last,) = await cur.fetchone()
    low = max(
        t
        for t in (
            last and last + TICK,
            # The server's own time of applying the timing: it fires what comes after.
            plan.timing_since and plan.timing_since + TICK,
            now - LOOKBACK,
        )
        if t is not None
    )
    low = min(low, slot)
    cur = await conn.execute(
        _Q["recorded_between"],
        # Around the slot too: a backfilled future slot's first 01:30 is after now.
        {
            "job_name": plan.job_name,
            "low": low - timedelta(hours=3),
            # A calendar's `preceding` runs a slot before its time: look as far ahead.
            "high": max(now, slot) + (_AHEAD if plan.timing.calendar else timedelta(0)),
            "run_id": plan.run_id,
        },
    )
    recorded = {row[0] for row in await cur.fetchall()}
    decision = _decide_for(plan, slot, last, low, now, recorded)
    origin = run_origin(decision, slot)
    for skipped, reason in decision.skip:
        await conn.execute(
            _Q["record_skipped"],
            {
                "job_name": plan.job_name,
                "scheduled_at": skipped,
                "origin": slot_origin(skipped, slot, origin),
                "workflow_id": plan.workflow_id,
                "run_id": plan.run_id,
                "reason": reason,
            },
        )
    own = list(decision.own) if decision.own and list(decision.own) != [slot] else []
    return (
        PlanResult(
            run=decision.run,
            skipped=len(decision.skip),
            gap=decision.gap,
            reason=next((r for s, r in decision.skip if s == slot), None),
            origin=origin,
            local_time=local_time(slot, plan.timing.timezone),
            own=own,
            calendar_note=calendar_note(plan.timing, own),
        ),
        decision,
    )


def run_origin(decision: Decision, slot: datetime) -> Origin:
    """How a schedule-started run came about, from its plan's decision for its own `slot`
    (or the slots its calendar puts at that time): the decision's origin (`manual` off the
    grid, `backfill` for an older slot), except that a run that catches up on or skips
    missed times is a `catch-up`."""
    own = list(decision.own) or [slot]
    if decision.origin == "scheduled" and (decision.skip or decision.run != own):
        return "catch-up"
    return decision.origin


def calendar_note(timing: Timing, own: list[datetime]) -> str | None:
    """What the calendar did to a run's own slots, for the UI: `moved from Fri 2026-12-25
    09:00 to Mon 2026-12-28: NYSE holiday (Christmas Day)`, one line a moved slot."""
    notes = [note.partition("; runs at")[0] for slot in own if (note := timing.what_of(slot))]
    return "\n".join(notes) or None


def slot_origin(slot: datetime, own: datetime, origin: Origin) -> Origin:
    """How the run of `slot` came about, in a run whose own slot `own` came about as
    `origin`: the one rule for the ledger, the result and the UI. The own slot has the
    run's origin; every other slot of the run is a missed one: `catch-up`."""
    return origin if slot == own else "catch-up"


def planned(plan: PlanInput, decision: Decision) -> None:
    """Count and log a plan once its skipped rows are committed."""
    happened_in(plan, decision).record()


def happened_in(plan: PlanInput, decision: Decision) -> Happened:
    """What a committed plan did, for the metrics (its skipped slots, its gap), logged."""
    if decision.skip:
        activity.logger.info(
            "catch-up: %d slot(s) run, %d recorded skipped",
            len(decision.run),
            len(decision.skip),
            extra={"job": plan.job_name, "scheduled_at": plan.scheduled_at.isoformat()},
        )
    skips: tuple[SkipReason, ...] = tuple(
        "repeated_local_time" if reason.startswith("repeated") else "catchup_policy"
        for _, reason in decision.skip
    )
    return Happened(plan.job_name, skips=skips, catchup_gap=decision.gap)


def local_time(slot: datetime, timezone: str) -> str:
    """The slot in the job's zone, as the Temporal UI shows it: `2027-03-14 03:00 EDT`."""
    local = slot.astimezone(ZoneInfo(timezone))
    return f"{local:%Y-%m-%d %H:%M} {local.tzname()}"


def future_slot_reason(plan: PlanInput) -> str | None:
    """Why this run must not do its slot's work yet, if the slot lies after the run's start.

    Temporal starts a backfilled future time at once (`temporal schedule backfill` takes
    any range): the work would judge "due" as of a time that has not come, and the slot
    would then count as done when its real time came. So such a run does nothing, records
    nothing (the slot's own run still comes at its time) and says why in its result.
    """
    if plan.scheduled_at <= plan.started_at + FUTURE_MARGIN:
        return None
    return (
        f"not run: slot {_fmt(plan.scheduled_at)} is after this run started "
        f"({_fmt(plan.started_at)}); a slot runs once its time has come, on schedule or "
        "by a later backfill"
    )


def not_yet(plan: PlanInput, reason: str) -> PlanResult:
    """The plan of a run whose slot lies after its start: nothing runs (see above)."""
    record_skip(plan.job_name, "future_slot")
    activity.logger.warning(
        "refused a run of a future slot",
        extra={"job": plan.job_name, "scheduled_at": plan.scheduled_at.isoformat()},
    )
    return PlanResult(
        run=[],
        reason=reason,
        origin="backfill",
        local_time=local_time(plan.scheduled_at, plan.timing.timezone),
    )


def _decide_for(
    plan: PlanInput,
    slot: datetime,
    last: datetime | None,
    low: datetime,
    now: datetime,
    recorded: set[datetime],
) -> Decision:
    timing = plan.timing
    reason = repeated_hour_reason(slot, recorded, plan)
    if reason is not None:
        return Decision([], [(slot, reason)], 0)
    if timing.calendar is not None:
        return _decide_on_calendar(plan, slot, last, low, now, recorded)
    on_grid = timing.fire_times(slot, slot + timedelta(seconds=1)) == [slot]
    older = (last is not None and last >= slot) or (
        plan.timing_since is not None and slot < plan.timing_since
    )
    if not on_grid:
        return Decision([slot], [], 0, "manual")  # a trigger: its slot is the trigger time
    if older:
        return Decision([slot], [], 0, "backfill")  # or a re-run of an older slot
    if plan.timing_pending:
        # Sync applied this timing a moment ago: nothing before it can have been missed.
        return Decision([slot], [], 0)
    # The newest fire times up to now: with more than MAX_CONSIDERED missed, the policy
    # still sees the most recent ones (older ones are beyond every policy's reach).
    due = timing.fire_times(low, now + TICK, limit=MAX_CONSIDERED, newest=True)
    missing = sorted({t for t in due if t not in recorded} | {slot})
    return decide(slot, plan.started_at, missing, plan)


def _decide_on_calendar(
    plan: PlanInput,
    at: datetime,
    last: datetime | None,
    low: datetime,
    now: datetime,
    recorded: set[datetime],
) -> Decision:
    """`_decide_for` for a calendar job, whose fire time `at` (adjusted: when the server
    fires) runs the slots the calendar puts there (unadjusted: the ledger keys).

    The policy decides on fire times, exactly as for a job without a calendar (`decide`):
    a fire time is missed when its run never came, and it is on time when this run is it.
    Each decided fire time then stands for its slots, less those already recorded; the
    run's own fire time stands for all its slots (a completed one is a no-op claim).
    """
    timing = plan.timing
    own = timing.slots_at(at)
    if not own:
        return Decision([at], [], 0, "manual")  # a trigger: its slot is the trigger time
    since = plan.timing_since if not plan.timing_pending else None
    if since is not None and at >= since:  # a slot from before its timing never runs
        own = [s for s in own if s >= since] or own[-1:]
    if (last is not None and last >= own[-1]) or (
        plan.timing_since is not None and at < plan.timing_since
    ):
        return Decision(own, [], 0, "backfill", tuple(own))  # or a re-run of older slots
    if plan.timing_pending:
        return Decision(own, [], 0, "scheduled", tuple(own))
    slots: dict[datetime, list[datetime]] = {}
    for fire in timing.fires(low, now + TICK, limit=MAX_CONSIDERED, newest=True):
        if fire.slot not in recorded and (since is None or fire.slot >= since):
            slots.setdefault(fire.at, []).append(fire.slot)
    slots[at] = own
    by_time = decide(at, plan.started_at, sorted(slots), plan)
    run = [s for t in by_time.run for s in slots[t]]
    skip = [(s, reason) for t, reason in by_time.skip for s in slots[t]]
    return Decision(run, skip, len(skip) if by_time.gap else 0, by_time.origin, tuple(own))
