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

from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, Field
from temporalio import activity

from activities.executions import Clock, utcnow
from activities.telemetry import record_catchup_gap, record_skip
from core.sql import queries
from timing.firetimes import fire_times, fixed_hour
from timing.zones import ZoneInfo

_Q = queries("activities.sql", "catchup")

# How far back missed runs are looked for at most, and how many are considered.
LOOKBACK = timedelta(days=31)
MAX_CONSIDERED = 1000
# A run that starts this much after its slot (beyond its jitter) counts as missed for `skip`.
ON_TIME = timedelta(seconds=30)
# A slot this far after its run's start has not come yet: the run does nothing for it. The
# margin covers the clock of a host that triggered a run with its own nominal time.
FUTURE_MARGIN = timedelta(seconds=60)


class PlanInput(BaseModel):
    job_name: str
    scheduled_at: datetime
    started_at: datetime  # when Temporal started the workflow
    workflow_id: str
    run_id: str
    cron: str | None = None
    interval_seconds: float | None = None
    timezone: str = "UTC"
    catchup: Literal["skip", "latest", "all"] = "latest"
    max_missed: int | None = None
    # When the server applied the job's current timing (see `JobRun.timing_since`); while
    # `timing_pending`, sync has just applied it and not yet stamped that time.
    timing_since: datetime | None = None
    timing_pending: bool = False
    start_at: datetime | None = None  # the schedule fires nothing before this
    end_at: datetime | None = None  # nor after this
    jitter_seconds: float = 0.0


class PlanResult(BaseModel):
    run: list[datetime] = Field(default_factory=list)  # slots to run, oldest first
    skipped: int = 0  # missed slots recorded as skipped
    gap: int = 0  # of those, beyond the catch-up cap
    reason: str | None = None  # why this run's own slot does not run, if it does not
    # How this run came about, for people reading it in the Temporal UI.
    kind: Literal["scheduled", "catch-up", "manual", "backfill"] = "scheduled"
    local_time: str = ""  # the slot in the job's time zone, e.g. "2027-03-14 03:00 EDT"


@dataclass(frozen=True)
class Decision:
    run: list[datetime]
    skip: list[tuple[datetime, str]]
    gap: int
    kind: Literal["scheduled", "catch-up", "manual", "backfill"] = "scheduled"


def _fmt(instant: datetime) -> str:
    return instant.strftime("%Y-%m-%dT%H:%M:%SZ")


def second_occurrence_of(slot: datetime, timezone: str) -> datetime | None:
    """If `slot` is the second of two instants with the same local time, the first one."""
    zone = ZoneInfo(timezone)
    local = slot.astimezone(zone).replace(tzinfo=None)
    first = local.replace(tzinfo=zone, fold=0).astimezone(slot.tzinfo)
    second = local.replace(tzinfo=zone, fold=1).astimezone(slot.tzinfo)
    return first if first != second and slot == second else None


def repeated_hour_reason(slot: datetime, recorded: set[datetime], plan: PlanInput) -> str | None:
    """Why a fixed-time job's second 01:30 (fall back) must not run, if the first one did."""
    if not (plan.cron and fixed_hour(plan.cron)):
        return None
    first = second_occurrence_of(slot, plan.timezone)
    if first is None or first not in recorded:
        return None
    local = slot.astimezone(ZoneInfo(plan.timezone))
    return (
        f"repeated local time {local:%H:%M} {plan.timezone} (fall back): "
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
    on_time = slot == latest and (
        started_at - slot <= ON_TIME + timedelta(seconds=plan.jitter_seconds)
    )
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
            return _not_yet(plan, future)
        now = self.clock()
        slot = plan.scheduled_at
        interval = timedelta(seconds=plan.interval_seconds) if plan.interval_seconds else None
        async with self.pool.connection() as conn, conn.transaction():
            cur = await conn.execute(_Q["last_recorded"], {"job_name": plan.job_name, "now": now})
            (last,) = await cur.fetchone()
            low = max(
                t
                for t in (
                    last and last + timedelta(microseconds=1),
                    # The server's own time of applying the timing: it fires what comes after.
                    plan.timing_since and plan.timing_since + timedelta(microseconds=1),
                    plan.start_at,
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
                    "high": max(now, slot),
                },
            )
            recorded = {row[0] for row in await cur.fetchall()}
            decision = _decide_for(plan, slot, last, low, now, recorded, interval)
            for skipped, reason in decision.skip:
                await conn.execute(
                    _Q["record_skipped"],
                    {
                        "job_name": plan.job_name,
                        "scheduled_at": skipped,
                        "workflow_id": plan.workflow_id,
                        "run_id": plan.run_id,
                        "reason": reason,
                    },
                )
        # Counted once the skipped rows are committed.
        for _, reason in decision.skip:
            record_skip(
                plan.job_name,
                "repeated_local_time" if reason.startswith("repeated") else "catchup_policy",
            )
        record_catchup_gap(plan.job_name, decision.gap)
        own = next((r for s, r in decision.skip if s == slot), None)
        if decision.skip:
            activity.logger.info(
                "catch-up: %d slot(s) run, %d recorded skipped",
                len(decision.run),
                len(decision.skip),
                extra={"job": plan.job_name, "scheduled_at": slot.isoformat()},
            )
        kind = decision.kind
        if kind == "scheduled" and (decision.skip or decision.run != [slot]):
            kind = "catch-up"
        local = slot.astimezone(ZoneInfo(plan.timezone))
        return PlanResult(
            run=decision.run,
            skipped=len(decision.skip),
            gap=decision.gap,
            reason=own,
            kind=kind,
            local_time=f"{local:%Y-%m-%d %H:%M} {local.tzname()}",
        )


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


def _not_yet(plan: PlanInput, reason: str) -> PlanResult:
    record_skip(plan.job_name, "future_slot")
    activity.logger.warning(
        "refused a run of a future slot",
        extra={"job": plan.job_name, "scheduled_at": plan.scheduled_at.isoformat()},
    )
    local = plan.scheduled_at.astimezone(ZoneInfo(plan.timezone))
    return PlanResult(
        run=[],
        reason=reason,
        kind="backfill",
        local_time=f"{local:%Y-%m-%d %H:%M} {local.tzname()}",
    )


def _decide_for(
    plan: PlanInput,
    slot: datetime,
    last: datetime | None,
    low: datetime,
    now: datetime,
    recorded: set[datetime],
    interval: timedelta | None,
) -> Decision:
    reason = repeated_hour_reason(slot, recorded, plan)
    if reason is not None:
        return Decision([], [(slot, reason)], 0)
    on_grid = slot in fire_times(
        plan.cron, plan.timezone, slot, slot + timedelta(seconds=1), interval=interval
    )
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
    high = now if plan.end_at is None else min(now, plan.end_at)
    due = fire_times(
        plan.cron,
        plan.timezone,
        low,
        high + timedelta(microseconds=1),
        interval=interval,
        limit=MAX_CONSIDERED,
    )
    missing = sorted({t for t in due if t not in recorded} | {slot})
    return decide(slot, plan.started_at, missing, plan)
