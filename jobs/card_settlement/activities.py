"""Card settlement, every minute: captured card payments become settled, one batch per run.

A run's slot is also its cutoff: it settles the payments of its currency captured up to its
scheduled time, so a retried, late or repeated run settles exactly what its slot covers and
a payment captured later waits for the next minute. Each chunk settles its payments in one
fenced transaction; the last one closes the batch with totals counted from its payments and
marks the execution completed, so a retry resumes and a stale attempt commits nothing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from pydantic import BaseModel, Field

from activities.chunks.chunked import Progress, run_in_chunks
from activities.common.models import WorkInput, WorkResult
from activities.run.kinds import PoolActivities
from core.sql import queries

_Q = queries(__package__, "queries")


class SettlementParams(BaseModel):
    """The job's typed input, set in its catalog entry."""

    # Settlement files are per currency: one job per currency settled.
    currency: str = Field(default="USD", pattern=r"^[A-Z]{3}$")
    chunk_size: int = Field(default=1000, ge=1, le=100_000)


async def open_batch(
    conn: AsyncConnection, job_name: str, scheduled_at: datetime, currency: str
) -> int:
    """The id of the slot's settlement batch, opened on the slot's first plan."""
    cur = await conn.execute(
        _Q["open_batch"],
        {"job_name": job_name, "scheduled_at": scheduled_at, "currency": currency},
    )
    (batch_id,) = await cur.fetchone()
    return batch_id


async def settle_chunk(
    conn: AsyncConnection, cursor: dict[str, Any], cutoff: datetime, chunk_size: int
) -> tuple[int, int, int | None]:
    """Settle the next chunk after `cursor`; return (payments, cents, last id settled)."""
    cur = await conn.execute(
        _Q["settle_chunk"], cursor | {"cutoff": cutoff, "chunk_size": chunk_size}
    )
    settled, cents, last_id = await cur.fetchone()
    return settled, cents, last_id


async def close_batch(conn: AsyncConnection, batch_id: int) -> tuple[int, int]:
    """Record the batch's payment count and total; return them."""
    cur = await conn.execute(_Q["close_batch"], {"batch_id": batch_id})
    payments, cents = await cur.fetchone()
    return payments, cents


class SettlementActivities(PoolActivities):
    """Card settlement activities; built by the worker with its connection pool."""

    async def settle_card_payments(self, work: WorkInput, params: SettlementParams) -> WorkResult:
        """Settle the captured payments up to the slot's time in its batch, resuming on retry."""
        execution = work.execution

        async def plan(conn: AsyncConnection) -> Progress:
            batch_id = await open_batch(
                conn, execution.job_name, execution.scheduled_at, params.currency
            )
            cur = await conn.execute(_Q["max_captured_id"])
            (upto_id,) = await cur.fetchone()
            return {
                "cursor": {
                    "batch_id": batch_id,
                    "currency": params.currency,
                    "after_id": 0,
                    "upto_id": upto_id,
                },
                "counts": {"settled": 0, "total_cents": 0, "chunks": 0},
            }

        async def step(conn: AsyncConnection, progress: Progress) -> tuple[Progress, bool]:
            cursor, counts = progress["cursor"], progress["counts"]
            settled, cents, last_id = await settle_chunk(
                conn, cursor, execution.scheduled_at, params.chunk_size
            )
            finished = settled < params.chunk_size or last_id >= cursor["upto_id"]
            counts = counts | {
                "settled": counts["settled"] + settled,
                "total_cents": counts["total_cents"] + cents,
                "chunks": counts["chunks"] + 1,
            }
            if finished:
                # The batch's totals commit with the completion mark, in this transaction.
                counts["settled"], counts["total_cents"] = await close_batch(
                    conn, cursor["batch_id"]
                )
            cursor = cursor | {"after_id": last_id if last_id is not None else cursor["after_id"]}
            return {"cursor": cursor, "counts": counts}, finished

        return await run_in_chunks(self.pool, execution, plan, step)
