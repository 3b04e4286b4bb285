"""The steps of a workflow job, on the activity side: each step recorded under its slot.

A workflow kind (`JobKind.workflow`) runs its slot as a Temporal workflow of steps
(`workflows/steps.py`); each step is an activity, a method of the kind's owner class, that
the engine wraps (`step_activity`). The wrapper validates the params, takes the slot's
execution over with a new fencing token and reads the step's record in `job_steps`:

- a step recorded as finished (its result was lost on the way back, or a later run of the
  slot got here) returns what it recorded and does nothing again;
- otherwise the method runs with a `StepRun`: transactions fenced by the token, the step's
  saved progress, and `finish()`, which marks the step completed in the same transaction as
  the step's last work. A stale attempt (a frozen worker whose heartbeat timed out) commits
  nothing, and a retry resumes from the saved progress.

A step that works through many items returns `StepRun.more()` after a batch, and the
workflow calls it again (showing "1,200 of 5,000" in the Temporal UI in between). Steps of
one run go one at a time: each attempt raises the execution's fencing token.

Compensations are steps too, recorded as `undo:<step>`, so each runs its effect once.
Only ids and counts travel back to the workflow; customer data stays in Postgres.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal, TypeVar

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, Field
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.chunks.chunked import fenced
from activities.claim import journal
from activities.claim.executions import Attempt, Fence, take_over_in
from activities.common.models import ExecutionRef, TimingField, WorkResult
from activities.common.telemetry import db_span, record_completed, record_run
from core.sql import first_row, queries

_Q = queries("activities.steps", "steps")

T = TypeVar("T")

UNDO = "undo:"
"""Prefix of a compensation's record in `job_steps`: `undo:<step>`."""


class StepInput(BaseModel):
    """One call of one step activity, from the job's workflow."""

    execution: ExecutionRef
    run_id: str  # the workflow run that holds the slot (ScheduledJobWorkflow's)
    step: str  # the record's name: the step's activity, or undo:<step> for a compensation
    params: dict[str, Any] = Field(default_factory=dict)
    timing: TimingField = None
    # Outputs of earlier steps the workflow passes on: ids and counts only.
    inputs: dict[str, Any] = Field(default_factory=dict)


class StepResult(BaseModel):
    """What a call of a step did; `done` False: call again, it resumes where it stopped."""

    done: bool = True
    counts: dict[str, int] = Field(default_factory=dict)
    output: dict[str, Any] = Field(default_factory=dict)
    items_done: int | None = None
    items_total: int | None = None
    # The step had been recorded finished before this call: it did nothing.
    already_done: bool = False


class FinishInput(BaseModel):
    execution: ExecutionRef
    run_id: str
    counts: dict[str, int] = Field(default_factory=dict)
    steps: list[str] = Field(default_factory=list)


class SettleInput(BaseModel):
    """A workflow job's run that ended without completing: how it ended and why."""

    execution: ExecutionRef
    run_id: str
    status: Literal["compensated", "failed"]
    error: str
    compensated: list[str] = Field(default_factory=list)
    counts: dict[str, int] = Field(default_factory=dict)


class StepRun:
    """One attempt at one step, handed to the job's step method."""

    def __init__(
        self, pool: AsyncConnectionPool, step: StepInput, fence: Fence, progress: dict
    ) -> None:
        self.pool = pool
        self.input = step
        self.fence = fence
        self.progress: dict[str, Any] = progress

    @property
    def execution(self) -> ExecutionRef:
        return self.input.execution

    @property
    def name(self) -> str:
        return self.input.step

    @property
    def inputs(self) -> dict[str, Any]:
        return self.input.inputs

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncConnection]:
        """A transaction that commits only while this attempt holds the slot."""
        async with fenced(self.pool, self.fence, self.execution, f"step:{self.name}") as conn:
            yield conn

    async def save(self, conn: AsyncConnection, progress: dict[str, Any]) -> None:
        """Keep `progress` with the step (in `conn`'s fenced transaction) for a retry."""
        await conn.execute(
            _Q["save"],
            {"id": self.execution.execution_id, "step": self.name, "progress": Jsonb(progress)},
        )
        self.progress = progress
        activity.heartbeat(progress)

    async def finish(
        self,
        conn: AsyncConnection,
        counts: dict[str, int] | None = None,
        output: dict[str, Any] | None = None,
        *,
        items: int | None = None,
        details: dict[str, Any] | None = None,
    ) -> StepResult:
        """Mark the step completed in `conn`'s fenced transaction, with what it did.

        `counts` and `output` (ids and counts: the workflow passes `output` on to later
        steps) go back to the workflow; `details` stay in the step's record in Postgres."""
        result = StepResult(
            counts=counts or {}, output=output or {}, items_done=items, items_total=items
        )
        recorded = result.model_dump(exclude={"already_done", "done"}) | (details or {})
        await conn.execute(
            _Q["finish"],
            {
                "id": self.execution.execution_id,
                "step": self.name,
                "progress": Jsonb(self.progress),
                "result": Jsonb(recorded),
            },
        )
        return result

    @asynccontextmanager
    async def keep_alive(self) -> AsyncIterator[None]:
        """Heartbeat in the background while the block runs (a batch waiting on a slow peer
        must not look like a dead worker)."""
        timeout = activity.info().heartbeat_timeout
        every = timeout.total_seconds() / 3 if timeout else 10.0

        async def beat() -> None:
            while True:
                await asyncio.sleep(every)
                activity.heartbeat(self.progress)

        beating = asyncio.create_task(beat())
        try:
            yield
        finally:
            beating.cancel()

    def more(
        self,
        counts: dict[str, int] | None = None,
        *,
        items_done: int | None = None,
        items_total: int | None = None,
    ) -> StepResult:
        """The step is not finished: the workflow calls it again, from the saved progress."""
        return StepResult(
            done=False, counts=counts or {}, items_done=items_done, items_total=items_total
        )


async def uninterrupted(work: Awaitable[T]) -> T:
    """Run `work` to its end even if the activity is cancelled meanwhile (an operator
    cancels the run), then let the cancellation through: a batch of requests already sent
    to a peer records their answers before the step stops, so its compensation finds no
    request in flight. Bound `work`'s duration (e.g. by the peer's timeout)."""
    task = asyncio.ensure_future(work)
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done():
                raise
            if not cancelled:
                activity.logger.info("step cancelled: finishing its batch under way first")
            cancelled = True
            continue
        if cancelled:
            raise asyncio.CancelledError("the step was cancelled; its last batch finished first")
        return result


async def begin_step(pool: AsyncConnectionPool, step: StepInput) -> StepRun | StepResult:
    """Take the execution over for `step`: its `StepRun`, or the recorded result of a step
    already finished. Raises a non-retryable error when the slot is no longer running."""
    execution = step.execution
    with db_span("db.begin_step", step):
        async with pool.connection() as conn, conn.transaction():
            fence = await take_over_in(
                conn, execution.execution_id, Attempt.current(claim_run_id=step.run_id)
            )
            if not isinstance(fence, Fence):
                raise _not_running(execution, fence[0], f"step {step.step} does nothing")
            cur = await conn.execute(
                _Q["begin"],
                {"id": execution.execution_id, "step": step.step, "attempt": fence.token},
            )
            status, progress, result = await cur.fetchone()
    if status == "completed":
        return StepResult.model_validate((result or {}) | {"already_done": True})
    return StepRun(pool, step, fence, progress)


def _not_running(execution: ExecutionRef, status: str, consequence: str) -> ApplicationError:
    return ApplicationError(
        f"execution {execution.execution_id} of {execution.job_name} is {status}, not "
        f"running; {consequence}",
        type="NotRunning",
        non_retryable=True,
    )


StepMethod = Callable[[StepRun, Any], Awaitable[StepResult]]


def step_activity(
    name: str,
    pool: AsyncConnectionPool,
    method: StepMethod,
    parse: Callable[[StepInput], Any],
) -> Callable[[StepInput], Awaitable[StepResult]]:
    """The activity Temporal runs for one step (or compensation) method of a workflow kind:
    validate the params with `parse`, begin the step, run it unless it already finished."""

    async def run(step: StepInput) -> StepResult:
        params = parse(step)
        begun = await begin_step(pool, step)
        if isinstance(begun, StepResult):
            activity.logger.info(
                "step %s already finished: nothing to do",
                step.step,
                extra={"job": step.execution.job_name, "execution_id": step.execution.execution_id},
            )
            return begun
        return await method(begun, params)

    run.__name__ = run.__qualname__ = name
    run.__doc__ = method.__doc__
    return activity.defn(name=name)(run)


class StepsActivities:
    """The engine's bookkeeping for workflow jobs; built by the worker with its pool."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self.pool = pool

    @activity.defn
    async def finish_steps(self, finish: FinishInput) -> WorkResult:
        """Every step finished: mark the execution completed (once; a retry finds it done)."""
        execution = finish.execution
        with db_span("db.finish_steps", finish):
            async with self.pool.connection() as conn, conn.transaction():
                fence = await take_over_in(
                    conn, execution.execution_id, Attempt.current(claim_run_id=finish.run_id)
                )
                if not isinstance(fence, Fence):
                    status, result = fence
                    if status == "completed":
                        counts = (result or {}).get("counts", {})
                        return WorkResult(counts=counts, already_completed=True)
                    raise _not_running(execution, status, "its steps cannot complete it")
                await fence.check(conn)
                summary = {"counts": finish.counts, "steps": finish.steps}
                duration = await fence.complete(conn, summary, summary)
                await journal.record(conn, fence.execution_id, fence.token, "finish_steps")
        record_completed(execution.job_name, duration)
        return WorkResult(counts=finish.counts)

    @activity.defn
    async def settle_steps(self, settle: SettleInput) -> None:
        """Record how a run that did not complete ended: compensated (what was undone) or
        failed. Only the workflow run that holds the slot may settle it."""
        execution = settle.execution
        result = {"counts": settle.counts, "compensated": settle.compensated}
        with db_span("db.settle_steps", settle):
            settled = await first_row(
                self.pool,
                _Q["compensated"],
                {
                    "id": execution.execution_id,
                    "run_id": settle.run_id,
                    "status": settle.status,
                    "error": settle.error,
                    "result": Jsonb(result),
                },
            )
        if settled is not None:
            record_run(execution.job_name, settle.status)
