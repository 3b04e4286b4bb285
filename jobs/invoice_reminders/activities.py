"""Nightly invoice reminders, the seeds' first job.

Unpaid invoices past due and not reminded in the last `remind_every_days` get
`last_reminder_at` set and one `InvoiceReminder` outbox message each, in the same
transaction, one id range at a time.
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


class InvoiceReminderParams(BaseModel):
    """The job's typed input, set in its catalog entry."""

    chunk_size: int = Field(default=5000, ge=1, le=100_000)
    remind_every_days: int = Field(default=7, ge=1)
    # Throttle between chunks to spare a busy database; 0 runs flat out.
    pause_between_chunks_ms: int = Field(default=0, ge=0, le=60_000)


async def remind_chunk(
    conn: AsyncConnection, fixed: dict, after_id: int, upto_id: int
) -> tuple[int, int]:
    """Remind the due invoices with ids in (after_id, upto_id]; return (reminded, queued)."""
    cur = await conn.execute(_Q["remind_chunk"], fixed | {"after_id": after_id, "upto_id": upto_id})
    reminded, queued = await cur.fetchone()
    return reminded, queued


def reminder_window(job_name: str, scheduled_at: datetime, remind_every_days: int) -> dict:
    """The values that fix which invoices a run for `scheduled_at` reminds."""
    return {
        "job_name": job_name,
        "scheduled_at": scheduled_at,
        "slot": scheduled_at.isoformat(),
        "as_of_date": scheduled_at.date(),
        "remind_before": scheduled_at - timedelta(days=remind_every_days),
    }


class InvoiceActivities(PoolActivities):
    """Invoice activities; built by the worker with its connection pool."""

    async def send_invoice_reminders(
        self, work: WorkInput, params: InvoiceReminderParams
    ) -> WorkResult:
        """Remind every overdue invoice once, resuming where a previous attempt stopped.

        "Overdue" and "recently reminded" are judged as of the scheduled time, so a late
        or backfilled run does that night's work, never a second reminder within the window.
        """
        fixed = reminder_window(
            work.execution.job_name, work.execution.scheduled_at, params.remind_every_days
        )

        async def plan(conn: AsyncConnection) -> Progress:
            cur = await conn.execute(_Q["max_id"])
            (upto_id,) = await cur.fetchone()
            return {
                "cursor": {"after_id": 0, "upto_id": upto_id},
                "counts": {"reminded": 0, "queued": 0, "chunks": 0},
            }

        async def step(conn: AsyncConnection, progress: Progress) -> tuple[Progress, bool]:
            after_id, upto_id = progress["cursor"]["after_id"], progress["cursor"]["upto_id"]
            if after_id >= upto_id:
                return progress, True
            high = min(after_id + params.chunk_size, upto_id)
            reminded, queued = await remind_chunk(conn, fixed, after_id, high)
            counts = progress["counts"]
            return {
                "cursor": {"after_id": high, "upto_id": upto_id},
                "counts": {
                    "reminded": counts["reminded"] + reminded,
                    "queued": counts["queued"] + queued,
                    "chunks": counts["chunks"] + 1,
                },
            }, high >= upto_id

        return await run_in_chunks(
            self.pool,
            work.execution,
            plan,
            step,
            pause_seconds=params.pause_between_chunks_ms / 1000,
        )
