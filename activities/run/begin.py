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

A run whose kind works its slot in one transaction (`JobKind.slot_work`, `JobRun.one_transaction`)
needs no `begin_run`: its work activity begins the run itself (`begin_and_work`), planning,
claiming, taking over, working and completing its first slot in ONE transaction. So does a
run of a kind that works in chunks (`JobKind.chunked`, `JobRun.chunked`): the same
transaction plans the work and does its first chunk (`activities.chunks.chunked.first_chunk`), and
completes the slot if the work ended there; if not, it saves the progress, and the run's
work activity goes on from it in fenced chunks, as any chunked attempt that takes over.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, Field
from temporalio import activity

from activities.catchup.missed import (
    CatchupActivities,
    Decision,
    PlanInput,
    PlanResult,
    future_slot_reason,
    happened_in,
    not_yet,
    plan_in,
    slot_origin,
)
from activities.chunks.chunked import first_chunk, settled_result
from activities.claim import journal
from activities.claim.executions import (
    Fence,
    OwnClaim,
    claim_counted_in,
    claim_happened,
    claim_own_in,
    take_over_in,
)
from activities.common.models import (
    ClaimInput,
    ClaimResult,
    ExecutionRef,
    Origin,
    WorkInput,
    WorkResult,
)
from activities.common.telemetry import Happened, db_span
from activities.runtime.runs import SlotWork


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


class WorkOrBegin(WorkInput):
    """A work activity's input: the slot it works, claimed before (`execution`), or, for a
    kind whose slot work fits in one transaction, the run's start (`begin`): the activity
    then plans, claims and works the run's first slot itself (`begin_and_work`)."""

    execution: ExecutionRef | None = None  # type: ignore[assignment]
    begin: BeginInput | None = None

    @property
    def job_name(self) -> str:
        return self.execution.job_name if self.execution else self.begin.claim.job_name


class BegunWork(WorkResult):
    """What `begin_and_work` did: the plan; the claim of its first slot (None when the
    plan runs nothing); that slot's work (the counts; `already_completed` when an earlier
    attempt of this run completed it). `declined`: why nothing was done or committed
    (another workflow run holds the slot, or the kind works in chunks): the workflow then
    begins with `begin_run` as other runs do."""

    plan: PlanResult = Field(default_factory=PlanResult)
    claim: ClaimResult | None = None
    declined: str | None = None
    # A chunked kind's work did not end within its first chunk: that chunk and its progress
    # committed (or an earlier attempt of this run's committed them), the slot is still
    # running, and the run's work activity goes on from the saved progress.
    more: bool = False


# A kind's chunked work activity (`JobKind.chunked`): (the slot's work input, params).
ChunkedWork = Callable[[WorkInput, Any], Awaitable[WorkResult]]


def origins(plan: PlanResult, own: datetime) -> list[Origin]:
    """How each slot of the plan came about (`activities.catchup.missed.slot_origin`); the slots
    a calendar job's fire time runs (`plan.own`) are all the run's own."""
    mine = set(plan.own)
    return [slot_origin(own if slot in mine else slot, own, plan.origin) for slot in plan.run]


def due_at(plan: PlanResult, own: datetime, slot: datetime) -> datetime | None:
    """When `slot` is due in this run: its fire time `own` for a slot a calendar moved
    there (a `preceding` slot runs before its time, a `following` one after it); None for
    any other slot, due at its own time."""
    return own if slot in plan.own and slot != own else None


async def _plan(
    conn: AsyncConnection, begin: BeginInput, now: datetime
) -> tuple[PlanResult, Decision | None]:
    """The run's plan in `conn`'s transaction; a run without a schedule's timing covers its
    own slot only and reads nothing."""
    if begin.plan is None:
        own = begin.claim.scheduled_at
        return PlanResult(run=[own], origin=begin.claim.origin or "scheduled"), None
    return await plan_in(conn, begin.plan, now)


def _first(begin: BeginInput, plan: PlanResult) -> ClaimInput:
    """The claim of the plan's first slot: the run's own, or the oldest it catches up on."""
    own = begin.claim.scheduled_at
    return begin.claim.model_copy(
        update={
            "scheduled_at": plan.run[0],
            "origin": origins(plan, own)[0],
            "due_at": due_at(plan, own, plan.run[0]),
        }
    )


class _Declined(Exception):
    """Roll the transaction back: the slot is not this run's to claim here."""


async def begin_and_work(
    pool: AsyncConnectionPool,
    begin: BeginInput,
    work: SlotWork | None,
    params: Any,
    chunked: ChunkedWork | None = None,
    timing: Any = None,
) -> BegunWork:
    """Plan the run, claim its first slot, take it over, work it, write its outbox rows and
    journal, and complete it: ONE transaction, fenced by the token it raises.

    Every attempt plans as of the run's start (`begin.server_now`, the workflow's clock,
    also the clock of the starting deadline), and the plan does not look at this run's own
    rows (`activities.catchup.missed`), so a retry whose predecessor's result was lost plans and
    claims the same. A failed attempt leaves nothing: its plan, claim and token roll back
    with its work. An older attempt woken late (a frozen worker) is refused by the
    take-over order and commits nothing (`take_over_in`). A slot another workflow run holds
    is not touched (`claim_own_in`): nothing commits, and the result says so (`declined`).

    `chunked`: the kind's work in chunks instead of `work` (given the job's `timing`). The
    transaction does its plan and first chunk, and completes the slot if the work ended
    there, or saves the progress (`more`). A later attempt of this run that finds the slot running was preceded by one
    that committed the first chunk and whose result was lost: it commits nothing more and
    says `more`, and the work activity's take-over refuses it if it is stale.
    """
    if begin.plan is not None and (reason := future_slot_reason(begin.plan)) is not None:
        return BegunWork(plan=not_yet(begin.plan, reason))
    now = begin.server_now
    own, duration, done, more = OwnClaim(None), None, WorkResult(), False
    with db_span("db.begin_and_work", begin.claim):
        try:
            async with pool.connection() as conn, conn.transaction():
                plan, decision = await _plan(conn, begin, now)
                if plan.run:
                    first = _first(begin, plan)
                    own = await claim_own_in(
                        conn,
                        first,
                        server_now=begin.server_now,
                        now=now,
                        resumable=chunked is not None,
                    )
                    if own.claim is None:
                        raise _Declined(
                            f"{first.job_name} at {first.scheduled_at.isoformat()}: another "
                            "workflow run holds the slot"
                        )
                    more = own.running
                    if own.claim.outcome == "claimed" and not more:
                        execution = ExecutionRef(
                            execution_id=own.claim.execution_id,
                            job_name=first.job_name,
                            scheduled_at=first.scheduled_at,
                        )
                        if chunked is not None:
                            done, duration, more = await _first_chunk_in(
                                conn, execution, own.fence, chunked, params, timing
                            )
                        else:
                            done, duration = await _work_in(
                                conn, execution, own.fence, work, params
                            )
        except _Declined as declined:
            return BegunWork(declined=str(declined))
    # Committed: what the transaction did, counted and logged once.
    happened = Happened(
        begin.claim.job_name, already_completed=done.already_completed, duration=duration
    )
    if decision is not None:
        happened += happened_in(begin.plan, decision)
    if own.inserted:
        happened += claim_happened(first, own.claim, now)
    happened.record()
    return BegunWork(plan=plan, claim=own.claim, more=more, **done.model_dump())


async def _work_in(
    conn: AsyncConnection,
    execution: ExecutionRef,
    fence: Fence | None,
    work: SlotWork,
    params: Any,
) -> tuple[WorkResult, float | None]:
    """Work the claimed slot and complete it in `conn`'s transaction, taking it over first
    unless the claim did (`fence`): the result, and the run's duration (None when an
    earlier attempt of this run completed it)."""
    if fence is None:
        taken = await take_over_in(conn, execution.execution_id)
        if not isinstance(taken, Fence):
            return settled_result(execution, *taken), None
        fence = taken
        await journal.enter(conn, fence.execution_id, fence.token)
    counts = await work(conn, execution, params)
    duration = await fence.complete_journaled(conn, {"counts": counts}, {"counts": counts})
    return WorkResult(counts=counts), duration


async def _first_chunk_in(
    conn: AsyncConnection,
    execution: ExecutionRef,
    fence: Fence | None,
    chunked: ChunkedWork,
    params: Any,
    timing: Any,
) -> tuple[WorkResult, float | None, bool]:
    """Plan a chunked kind's work and do its first chunk in `conn`'s transaction, taking
    the slot over first unless the claim did (`fence`); then complete the slot if the work
    ended, or save the progress and journal the chunk: the result, the run's duration
    (None unless completed here), and whether work is left (`BegunWork.more`)."""
    if fence is None:
        taken = await take_over_in(conn, execution.execution_id)
        if not isinstance(taken, Fence):
            return settled_result(execution, *taken), None, False
        fence = taken
        await journal.enter(conn, fence.execution_id, fence.token)
    work = WorkInput(execution=execution, params=params.model_dump(mode="json"), timing=timing)
    chunk = await first_chunk(conn, chunked, work, params)
    counts = chunk.progress["counts"]
    if not chunk.finished:
        await fence.save_progress(conn, chunk.progress)
        await journal.record(conn, fence.execution_id, fence.token, "chunk")
        return WorkResult(counts=counts), None, True
    duration = await fence.complete_journaled(conn, chunk.progress, {"counts": counts})
    return WorkResult(counts=counts), duration, False


class BeginActivities(CatchupActivities):
    """`begin_run`: `plan_run` and the claim of the run's first slot, in one transaction;
    built by the worker with its pool (and a clock, for tests)."""

    @activity.defn
    async def begin_run(self, begin: BeginInput) -> BeginResult:
        """Plan the run and claim its first slot, in one transaction."""
        with db_span("db.begin_run", begin.claim):
            return await self._begin(begin)

    async def _begin(self, begin: BeginInput) -> BeginResult:
        if begin.plan is not None and (reason := future_slot_reason(begin.plan)) is not None:
            return BeginResult(plan=not_yet(begin.plan, reason))
        # The workflow's clock (the server's), never this worker's: a worker whose clock
        # runs ahead would plan a slot not yet due, or judge an on-time one past its
        # starting deadline (docs/architecture.md, "Which clock decides what").
        now = begin.server_now
        happened = Happened(begin.claim.job_name)
        async with self.pool.connection() as conn, conn.transaction():
            plan, decision = await _plan(conn, begin, now)
            claim = None
            if plan.run:
                first = _first(begin, plan)
                with db_span("db.claim_execution", first):
                    claim, happened = await claim_counted_in(
                        conn, first, server_now=begin.server_now, now=now
                    )
        # Committed: what the transaction did, counted and logged once.
        if begin.plan is not None and decision is not None:
            happened += happened_in(begin.plan, decision)
        happened.record()
        return BeginResult(plan=plan, claim=claim)
