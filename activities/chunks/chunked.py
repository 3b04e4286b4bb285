"""Long work in fenced chunks: each chunk commits alone, progress survives the attempt.

A chunk's domain changes, outbox rows and progress commit in one transaction that first
checks the fencing token, and the last chunk's transaction also marks the execution
completed. A retried attempt takes over with a higher token and resumes from the saved
progress, so nothing is done twice and a stale attempt commits nothing.

Work that fits in one transaction (`run_in_one_transaction`) pays for none of that: the
attempt takes the slot over, works, writes its outbox rows, journals and completes in one
transaction, fenced by the token it raised in it.

Nor does a chunked run whose work ends within its first chunk: the engine runs the kind's
work for its first chunk only (`first_chunk`) inside the transaction that begins the run
(`activities.run.begin.begin_and_work`), which then completes the slot, or saves the progress
that the work activity's fenced chunks resume from. The kind's code is the same on both
paths: it hands `run_in_chunks` its plan and step, and the engine decides where they run.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.chunks.gate import pass_chunk_gate
from activities.claim import journal
from activities.claim.executions import Fence, take_over, take_over_in
from activities.common.models import ExecutionRef, WorkInput, WorkResult
from activities.common.telemetry import db_span, fenced_span, record_completed, record_run

Progress = dict[str, Any]
# plan(conn) -> the first progress; step(conn, progress) -> (next progress, finished?)
Plan = Callable[[AsyncConnection], Awaitable[Progress]]
Step = Callable[[AsyncConnection, Progress], Awaitable[tuple[Progress, bool]]]

# Test-only (the audit's mutation suite): jobs whose fenced transactions skip the fence
# check, so a stale attempt commits and the audit must name it. Empty in production.
_unfenced: frozenset[str] = frozenset()


def disable_fence_check(job_names: frozenset[str]) -> None:
    """Test-only: skip the fence check of these jobs' transactions in this process."""
    global _unfenced
    _unfenced = frozenset(job_names)


@asynccontextmanager
async def fenced(
    pool: AsyncConnectionPool,
    fence: Fence,
    execution: ExecutionRef | None = None,
    what: str = "chunk",
) -> AsyncIterator[AsyncConnection]:
    """A transaction that belongs to `fence`'s attempt, or `StaleAttemptError` before any work.

    The execution row stays locked until commit, so no newer attempt can take over while
    this transaction's work is in flight. `execution` labels its span. Its outbox rows name
    the attempt, and its last statement journals `what` it committed (`activities.claim.journal`).
    """
    with fenced_span(fence, execution):
        async with pool.connection() as conn, conn.transaction():
            if execution is None or execution.job_name not in _unfenced:
                await fence.check(conn)
            await journal.enter(conn, fence.execution_id, fence.token)
            yield conn
            await journal.record(conn, fence.execution_id, fence.token, what)


async def begin_attempt(pool: AsyncConnectionPool, execution: ExecutionRef) -> Fence | WorkResult:
    """Take the execution over with a new fencing token, or say it is already done.

    Returns the attempt's `Fence`, or the recorded result when another run completed the
    slot; raises a non-retryable error when the slot is neither running nor completed.
    """
    with db_span("db.take_over", execution):
        taken = await take_over(pool, execution.execution_id)
    if isinstance(taken, Fence):
        return taken
    return settled(execution, *taken)


def settled(execution: ExecutionRef, status: str, result: dict[str, Any] | None) -> WorkResult:
    """The result of an attempt that found the slot no longer running, counted."""
    found = settled_result(execution, status, result)
    record_run(execution.job_name, "already_completed")
    return found


def settled_result(
    execution: ExecutionRef, status: str, result: dict[str, Any] | None
) -> WorkResult:
    """The result of an attempt that found the slot no longer running (its caller counts
    it: `already_completed`)."""
    if status == "completed":
        return WorkResult(counts=(result or {}).get("counts", {}), already_completed=True)
    raise ApplicationError(
        f"execution {execution.execution_id} of {execution.job_name} is {status}, "
        "not running; nothing to do",
        type="NotRunning",
        non_retryable=True,
    )


async def run_in_one_transaction(
    pool: AsyncConnectionPool, execution: ExecutionRef, plan: Plan, step: Step
) -> WorkResult:
    """Take the slot over, do all of `step` and complete, in ONE transaction.

    For a job whose whole work is small (a statement or a few: `jobs.nightly_reconcile`):
    the take-over (`take_over_in`: the fencing token raised, the take-over order checked,
    journaled by its trigger), the work and its outbox rows (named after this execution
    and attempt, `activities.claim.journal`), the completion and its journal row commit together
    or not at all. The row stays locked from the take-over to the commit, so no other
    attempt commits in between, and an attempt that fails leaves nothing behind: the
    token it raised rolls back with its work, and the next attempt starts from scratch.
    Saved progress (a chunked attempt of an earlier release) is ignored: no chunk of such
    work ever commits without the completion.
    """
    with db_span("db.work_in_one_transaction", execution):
        async with pool.connection() as conn, conn.transaction():
            taken = await take_over_in(conn, execution.execution_id)
            if not isinstance(taken, Fence):
                return settled(execution, *taken)
            fence = taken
            await journal.enter(conn, fence.execution_id, fence.token)
            progress, finished = await plan(conn), False
            while not finished:
                progress, finished = await step(conn, progress)
            duration = await fence.complete(conn, progress, {"counts": progress["counts"]})
            await journal.record(conn, fence.execution_id, fence.token, "complete")
    record_completed(execution.job_name, duration)  # after the commit: counted once
    return WorkResult(counts=progress["counts"])


@dataclass
class FirstChunk:
    """The first chunk of a chunked run, worked in the transaction that begins the run
    (`conn`): the progress after it, and whether the work finished in it."""

    conn: AsyncConnection
    progress: Progress | None = None
    finished: bool = False


# Set while the engine runs a kind's chunked work for its first chunk only (`first_chunk`).
_first_chunk: ContextVar[FirstChunk | None] = ContextVar("first_chunk", default=None)


def works_in_chunks(method: Callable) -> bool:
    """Whether a kind's work activity is written on `run_in_chunks` (it calls it): the
    engine may then run its first chunk in the transaction that begins a run."""
    code = getattr(method, "__code__", None)
    return code is not None and "run_in_chunks" in code.co_names


async def first_chunk(
    conn: AsyncConnection, method: Callable, work: WorkInput, params: Any
) -> FirstChunk:
    """Run a kind's chunked work (`method`, written on `run_in_chunks`) for its plan and
    first chunk only, in `conn`'s transaction, which the caller fenced and commits: the
    progress after that chunk, and whether the work is finished."""
    first = FirstChunk(conn)
    token = _first_chunk.set(first)
    try:
        await method(work, params)
    finally:
        _first_chunk.reset(token)
    if first.progress is None:
        raise ApplicationError(
            f"{work.execution.job_name}: its work did not run through run_in_chunks",
            type="NotChunked",
            non_retryable=True,
        )
    return first


async def run_in_chunks(
    pool: AsyncConnectionPool,
    execution: ExecutionRef,
    plan: Plan,
    step: Step,
    pause_seconds: float = 0.0,
) -> WorkResult:
    """Run `step` in fenced transactions until it reports the work finished.

    `plan` fixes the work's bounds once, on the first attempt, so retries cover the same
    rows. Progress must hold a `counts` dict; it becomes the result. Called by the engine
    for a run's first chunk (`first_chunk`): the plan and one step, in the transaction
    that begins the run, and nothing else.
    """
    first = _first_chunk.get()
    if first is not None:
        first.progress, first.finished = await step(first.conn, await plan(first.conn))
        return WorkResult(counts=first.progress["counts"])
    fence = await begin_attempt(pool, execution)
    if isinstance(fence, WorkResult):
        return fence
    progress = fence.progress
    if not progress:
        async with fenced(pool, fence, execution, "plan") as conn:
            await fence.save_progress(conn, await plan(conn))
        progress = fence.progress

    while True:
        await pass_chunk_gate(pool, progress)  # test-only; a no-op unless a test sets it
        async with fenced(pool, fence, execution) as conn:
            progress, finished = await step(conn, progress)
            if finished:
                duration = await fence.complete(conn, progress, {"counts": progress["counts"]})
                break
            await fence.save_progress(conn, progress)
        activity.heartbeat(progress)
        if pause_seconds:
            await asyncio.sleep(pause_seconds)
    record_completed(execution.job_name, duration)  # after the commit: counted once
    return WorkResult(counts=progress["counts"])
