"""Hourly sync: each run aggregates exactly its own data window of `events`.

A run scheduled at T processes the window [previous fire time, T), both read from the job's
cron, never from the clock: a run that starts late, is retried or is backfilled a week later
processes the same rows as an on-time run would have. A manual trigger between fire times
processes the last whole window before it.

Each window is claimed by a `sync_windows` row of the job, so it is processed once whichever
run gets there first (two jobs of this kind keep their own windows and totals); its events are added to `hourly_account_totals` in chunks, each chunk its own
fenced transaction, and the last chunk marks the window done with the execution.
"""

from __future__ import annotations

from datetime import datetime

from psycopg import AsyncConnection
from pydantic import BaseModel, Field
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.chunks.chunked import Progress, run_in_chunks
from activities.claim.heartbeat import heartbeating
from activities.common.models import ExecutionRef, WorkInput, WorkResult
from activities.run.kinds import PoolActivities
from core.sql import queries
from timing import TICK, Timing

_Q = queries(__package__, "queries")

WINDOW_BUSY = "WindowBusy"
# The cursor before a window's first event: (occurred_at, id) > (-infinity, 0).
_START = {"after_at": "-infinity", "after_id": 0}


class HourlySyncParams(BaseModel):
    """The job's typed input, set in its catalog entry."""

    chunk_size: int = Field(default=5000, ge=1, le=100_000)
    # Throttle between chunks to spare a busy database; 0 runs flat out.
    pause_between_chunks_ms: int = Field(default=0, ge=0, le=60_000)


def data_window(timing: Timing, scheduled_at: datetime) -> tuple[datetime, datetime]:
    """The window [start, end) a run for `scheduled_at` processes.

    `end` is the newest fire time at or before `scheduled_at` (the slot itself, unless a
    manual trigger put it between fire times) and `start` the fire time before `end`, the
    job's start_at and end_at aside (its first window still has a start). Pure, so DST
    years ahead can be tested today.
    """
    unbounded = timing.model_copy(update={"start_at": None, "end_at": None})
    ends = unbounded.fire_times(None, scheduled_at + TICK, limit=1, newest=True)
    starts = ends and unbounded.fire_times(None, ends[0], limit=1, newest=True)
    if not starts:
        raise ValueError(f"no fire time of {timing.text} ({timing.timezone}) before {scheduled_at}")
    return starts[0], ends[0]


def job_window(work: WorkInput) -> tuple[datetime, datetime]:
    """`data_window` with the timing the job's schedule was built with."""
    if work.timing is None:
        raise ApplicationError(
            f"{work.execution.job_name}: started without a schedule's timing; its data "
            "window comes from the job's cron",
            non_retryable=True,
        )
    return data_window(work.timing, work.execution.scheduled_at)


class HourlySyncActivities(PoolActivities):
    """Hourly-sync activities; built by the worker with its connection pool."""

    async def sync_hourly_totals(self, work: WorkInput, params: HourlySyncParams) -> WorkResult:
        """Aggregate the slot's window of events per account, once per window."""
        execution = work.execution
        start, end = job_window(work)
        window = {"start": start.isoformat(), "end": end.isoformat()}

        async def plan(conn: AsyncConnection) -> Progress:
            return _fresh(window)

        async def step(conn: AsyncConnection, progress: Progress) -> tuple[Progress, bool]:
            fixed = {
                "job_name": execution.job_name,
                "window_start": start,
                "window_end": end,
                "scheduled_at": execution.scheduled_at,
                "execution_id": execution.execution_id,
            }
            state = await _hold_window(conn, fixed, execution)
            if state == "done":  # another run of this window finished it
                done = _fresh(window)
                done["counts"]["already_done"] = 1
                return done, True
            if state == "fresh":  # claimed or taken over just now: from the first event
                progress = _fresh(window)

            cursor, counts = progress["cursor"], dict(progress["counts"])
            cur = await conn.execute(
                _Q["aggregate_chunk"], fixed | cursor | {"chunk_size": params.chunk_size}
            )
            events, last_at, last_id, _ = await cur.fetchone()
            if events:
                cursor = {"after_at": last_at.isoformat(), "after_id": last_id}
            counts["events"] += events
            counts["chunks"] += 1
            finished = events < params.chunk_size
            if finished:
                cur = await conn.execute(
                    _Q["finish_window"],
                    {
                        "job_name": execution.job_name,
                        "window_start": start,
                        "events": counts["events"],
                    },
                )
                (counts["accounts"],) = await cur.fetchone()
                counts["windows"] = 1
            return {"window": window, "cursor": cursor, "counts": counts}, finished

        return await run_in_chunks(
            self.pool,
            execution,
            plan,
            step,
            pause_seconds=params.pause_between_chunks_ms / 1000,
        )


def _fresh(window: dict) -> Progress:
    return {
        "window": window,
        "cursor": dict(_START),
        "counts": {"windows": 0, "already_done": 0, "events": 0, "accounts": 0, "chunks": 0},
    }


async def _hold_window(conn: AsyncConnection, fixed: dict, execution: ExecutionRef) -> str:
    """Make sure this execution holds the window's claim, under its row lock.

    Returns "fresh" (claimed or taken over now: start from the first event), "held"
    (carry on from the saved cursor) or "done" (already processed). Raises a retryable
    `WindowBusy` while another execution is still working on the window.
    """
    cur = await conn.execute(_Q["insert_window"], fixed)
    if await cur.fetchone() is not None:
        return "fresh"
    # A frozen run of the same window may hold its row: wait, heartbeating.
    cur = await heartbeating(conn.execute(_Q["lock_window"], fixed))
    window_end, status, holder, holder_status = await cur.fetchone()
    if window_end != fixed["window_end"]:
        raise ApplicationError(
            f"{execution.job_name}: window starting {fixed['window_start'].isoformat()} was "
            f"recorded ending {window_end.isoformat()}, not {fixed['window_end'].isoformat()}; "
            "did the job's cron change? Resolve sync_windows by hand",
            non_retryable=True,
        )
    if status == "done":
        return "done"
    if holder == execution.execution_id:
        return "held"
    if holder_status == "running":
        raise ApplicationError(
            f"{execution.job_name}: window [{fixed['window_start'].isoformat()}, "
            f"{fixed['window_end'].isoformat()}) is being processed by execution {holder}; "
            "retrying until it finishes",
            type=WINDOW_BUSY,
        )
    # The holder failed (or its record was cleaned up) part-way through: start over here.
    cur = await conn.execute(_Q["take_window"], fixed)
    (cleared,) = await cur.fetchone()
    activity.logger.info(
        "took window over from execution %s, cleared %d partial totals",
        holder,
        cleared,
        extra={"job": execution.job_name, "execution_id": execution.execution_id},
    )
    return "fresh"
