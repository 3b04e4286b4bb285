"""Weekly cleanup: delete delivered outbox messages and old execution records.

Retention is judged as of the run's scheduled time, so a late run deletes what the on-time
run would have. Rows go in small batches, each its own short fenced transaction that skips
rows other transactions hold (`FOR UPDATE SKIP LOCKED`): the relay and the jobs never wait
for the cleanup, and the cleanup never waits for them.

Never deleted: undelivered or dead outbox messages, running executions, this run's own
record, and each job's newest record.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from psycopg import AsyncConnection
from pydantic import BaseModel, Field

from activities.chunks.chunked import Progress, run_in_chunks
from activities.common.models import WorkInput, WorkResult
from activities.run.kinds import PoolActivities
from core.sql import queries

_Q = queries(__package__, "queries")


class CleanupParams(BaseModel):
    """The job's typed input, set in its catalog entry."""

    outbox_retention_days: int = Field(default=30, ge=1)
    # At least a month: catch-up looks up to 31 days back for missed runs, and
    # `schedules check` judges recent history.
    executions_retention_days: int = Field(default=90, ge=32)
    batch_size: int = Field(default=1000, ge=1, le=10_000)
    # Throttle between batches to spare a busy database; 0 runs flat out.
    pause_between_batches_ms: int = Field(default=0, ge=0, le=60_000)


def cutoffs(scheduled_at: datetime, params: CleanupParams) -> dict[str, datetime]:
    """What counts as old for a run scheduled at `scheduled_at`."""
    return {
        "outbox_before": scheduled_at - timedelta(days=params.outbox_retention_days),
        "executions_before": scheduled_at - timedelta(days=params.executions_retention_days),
    }


class CleanupActivities(PoolActivities):
    """Cleanup activities; built by the worker with its connection pool."""

    async def delete_expired_records(self, work: WorkInput, params: CleanupParams) -> WorkResult:
        """Delete delivered outbox messages, then old executions, one batch at a time."""
        execution = work.execution
        before = cutoffs(execution.scheduled_at, params)

        async def plan(conn: AsyncConnection) -> Progress:
            return {
                "phase": "outbox",
                "before": {k: v.isoformat() for k, v in before.items()},
                "counts": {"outbox_deleted": 0, "executions_deleted": 0, "batches": 0},
            }

        async def step(conn: AsyncConnection, progress: Progress) -> tuple[Progress, bool]:
            counts = dict(progress["counts"])
            counts["batches"] += 1
            if progress["phase"] == "outbox":
                cur = await conn.execute(
                    _Q["delete_dispatched_outbox"],
                    {"before": before["outbox_before"], "batch_size": params.batch_size},
                )
                counts["outbox_deleted"] += cur.rowcount
                phase = "outbox" if cur.rowcount == params.batch_size else "executions"
                return progress | {"phase": phase, "counts": counts}, False
            cur = await conn.execute(
                _Q["delete_old_executions"],
                {
                    "before": before["executions_before"],
                    "batch_size": params.batch_size,
                    "own_id": execution.execution_id,
                },
            )
            counts["executions_deleted"] += cur.rowcount
            return progress | {"counts": counts}, cur.rowcount < params.batch_size

        return await run_in_chunks(
            self.pool,
            execution,
            plan,
            step,
            pause_seconds=params.pause_between_batches_ms / 1000,
        )
