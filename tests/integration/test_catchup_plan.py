"""The catch-up planner against real PostgreSQL, with the clock as a parameter: which fire
times count as missed (the policies themselves are unit-tested in tests/unit)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from temporalio.testing import ActivityEnvironment

from activities.catchup.missed import CatchupActivities, PlanInput, PlanResult
from tests.integration.jobs import executions
from timing import Timing

EVERY = timedelta(seconds=10)
T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)  # on the 10 s grid


async def plan_at(
    pool, now: datetime, slot: datetime, timing: Timing | None = None, **fields
) -> PlanResult:
    plan = PlanInput(
        job_name="ticking",
        scheduled_at=slot,
        started_at=slot,
        workflow_id=f"ticking-{slot:%Y-%m-%dT%H:%M:%SZ}",
        run_id="run-1",
        timing=timing or Timing(interval=EVERY),
        catchup="all",
        max_missed=100,
        **fields,
    )
    activities = CatchupActivities(pool, clock=lambda: now)
    return await ActivityEnvironment().run(activities.plan_run, plan)


async def test_missed_times_count_from_just_after_the_servers_time_of_the_timing(pool, db):
    # Applied a moment after T0: T0 itself never fired, the next fire time is T0 + 10 s.
    applied = T0 + timedelta(microseconds=300)
    late = T0 + 3 * EVERY
    result = await plan_at(pool, late + timedelta(seconds=1), late, timing_since=applied)
    assert result.run == [T0 + EVERY, T0 + 2 * EVERY, late] and result.skipped == 0
    assert executions(db, "ticking") == []  # nothing to record: all three run


async def test_a_pending_timing_counts_no_missed_time(pool, db):
    slot = T0 + 5 * EVERY
    result = await plan_at(
        pool, slot + timedelta(seconds=1), slot, timing_since=T0, timing_pending=True
    )
    assert (result.run, result.skipped, result.origin) == ([slot], 0, "scheduled")
    assert executions(db, "ticking") == []


async def test_no_fire_time_after_end_at_counts_as_missed(pool, db):
    # Bounded to fire once, at T0: a run that plans long after sees nothing else due.
    result = await plan_at(
        pool,
        T0 + 10 * EVERY,
        T0,
        Timing(
            interval=EVERY,
            start_at=T0 - timedelta(seconds=1),
            end_at=T0 + timedelta(seconds=1),
        ),
        timing_since=T0 - timedelta(minutes=5),
    )
    assert (result.run, result.skipped, result.origin) == ([T0], 0, "scheduled")
