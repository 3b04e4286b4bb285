"""The start of a run in one step: plan the slots it covers and claim the first of them.

`ScheduledJobWorkflow` runs `begin_run` as a *local activity*, in the workflow's own
worker, before the run's first workflow task completes: the work activity is scheduled in
the same task, so a run costs the server one activity round trip (the work), as a plain
Temporal workflow does, instead of three (plan, claim, work).

Why that is safe: a local activity is at-least-once like any other. If the worker dies
before the workflow task that carries its result completes, the next worker runs it again
under the same workflow run, and both halves converge: the plan records skipped slots with
ON CONFLICT DO NOTHING and finds the same missed times, and the claim of a slot this run
already claimed passes it to this run again (`claim_in`), so the work's fencing token still
decides who commits. It is short (two or three statements) and needs no heartbeat; it
retries with the same policy as the bookkeeping activities, on timers beyond a minute. The
server's clock for the future-slot check comes from the workflow (`workflow.now()`), not
from the worker.
"""

from __future__ import annotations

from datetime import datetime

from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel
from temporalio import activity

from activities.catchup import (
    PlanInput,
    PlanResult,
    future_slot_reason,
    not_yet,
    plan_in,
    planned,
    slot_origin,
)
from activities.executions import Clock, claim_in, utcnow
from activities.models import ClaimInput, ClaimResult, Origin
from activities.telemetry import db_span


class BeginInput(BaseModel):
    """A run's start: its plan's input (None for a run without a schedule's timing, which
    covers its own slot only) and what its claims carry."""

    plan: PlanInput | None = None
    claim: ClaimInput  # of the run's own slot; a catch-up slot's claim differs in time/origin
    server_now: datetime  # the workflow's clock: the server's time of this workflow task


class BeginResult(BaseModel):
    plan: PlanResult
    # The claim of `plan.run[0]`, made in the same transaction; None when nothing runs.
    claim: ClaimResult | None = None


def origins(plan: PlanResult, own: datetime) -> list[Origin]:
    """How each slot of the plan came about (`activities.catchup.slot_origin`); the slots
    a calendar job's fire time runs (`plan.own`) are all the run's own."""
    mine = set(plan.own)
    return [slot_origin(own if slot in mine else slot, own, plan.origin) for slot in plan.run]


def due_at(plan: PlanResult, own: datetime, slot: datetime) -> datetime | None:
    """When `slot` is due in this run: its fire time `own` for a slot a calendar moved
    there (a `preceding` slot runs before its time, a `following` one after it); None for
    any other slot, due at its own time."""
    return own if slot in plan.own and slot != own else None


class BeginActivities:
    """`begin_run`; built by the worker with its pool."""

    def __init__(self, pool: AsyncConnectionPool, clock: Clock = utcnow) -> None:
        self.pool = pool
        self.clock = clock

    @activity.defn
    async def begin_run(self, begin: BeginInput) -> BeginResult:
        """Plan the run and claim its first slot, in one transaction."""
        with db_span("db.begin_run", begin.claim):
            return await self._begin(begin)

    async def _begin(self, begin: BeginInput) -> BeginResult:
        own = begin.claim.scheduled_at
        if begin.plan is not None and (reason := future_slot_reason(begin.plan)) is not None:
            return BeginResult(plan=not_yet(begin.plan, reason))
        now = self.clock()
        async with self.pool.connection() as conn, conn.transaction():
            if begin.plan is None:
                origin = begin.claim.origin or "scheduled"
                plan, decision = PlanResult(run=[own], origin=origin), None
            else:
                plan, decision = await plan_in(conn, begin.plan, now)
            claim = None
            if plan.run:
                first = begin.claim.model_copy(
                    update={
                        "scheduled_at": plan.run[0],
                        "origin": origins(plan, own)[0],
                        "due_at": due_at(plan, own, plan.run[0]),
                    }
                )
                with db_span("db.claim_execution", first):
                    claim = await claim_in(conn, first, server_now=begin.server_now, now=now)
        if begin.plan is not None and decision is not None:
            planned(begin.plan, decision)
        return BeginResult(plan=plan, claim=claim)
