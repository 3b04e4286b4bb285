"""A batch of light runtime slots worked in ONE transaction (`run_runtime_batch`).

Kinds that opt in (`RuntimeKind.batch`, `JobKind.slot_work`) run many slots per activity
call; each slot still has its own ledger row (`job_executions`, `rt-<id>` at the slot), its
own fencing token and its own outbox rows. A call works up to `SLOTS_PER_ACTIVITY` slots:

- **Set-based**, the common case (slots nobody claimed yet, a herd): ONE statement claims
  them all and takes each over under the activity attempt's token, in the take-over order
  of `activities.claim.executions.Attempt`, journaling each take-over as the table's trigger
  journals a raised token (`claim_batch`); then each slot's work runs, its outbox rows
  naming its execution and token (`activities.claim.journal.enter`); ONE statement completes
  them all and journals each completion (`complete_batch`). Three statements for 100
  ledger rows, and one `enter` a slot, instead of a savepoint and seven statements a slot.
- **One by one**, for the rest: a slot whose row exists already (settled: nothing to do;
  failed or running: claimed again, where the take-over order refuses a stale attempt), a
  kind this worker does not run in batches (recorded skipped), and every slot of the call
  when one slot's work raised in the set-based pass: that pass is rolled back whole (it
  committed nothing) and the call is worked again, each slot in a savepoint of its own,
  so the slot whose work raises is rolled back alone and recorded `failed`.

A stale attempt commits nothing: the rows it would claim are there already (an attempt
that committed them, or holds them uncommitted: the insert waits for it), so it finds
them settled, or its take-over is refused (`StaleAttemptError` rolls the call back). A lost
database rolls the call back too; the activity's retry does it again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg.types.json import Jsonb
from temporalio import activity

from activities.claim import journal
from activities.claim.auto_pause import auto_pause_in
from activities.claim.executions import (
    Attempt,
    Fence,
    StaleAttemptError,
    claim_in,
    holder_name,
    take_over_in,
)
from activities.common.models import ClaimInput, ExecutionRef, Origin
from activities.common.telemetry import record_claim, record_completed, runtime_kind
from activities.outbox import notices
from activities.runtime.models import BatchResult, ledger_name
from core import redact
from core.sql import queries

_Q = queries("activities.runtime", "runtime")
_EXECUTIONS = queries("activities.claim", "executions")
_CATCHUP = queries("activities.catchup", "catchup")

# A batch's slots per activity call (one transaction; it heartbeats as it goes).
SLOTS_PER_ACTIVITY = 500
# A slot further ahead of the server's clock is left to `claim_in`, which refuses it.
_FUTURE_MARGIN = timedelta(seconds=60)

# One slot's work inside the transaction that claims and completes it: its counts.
SlotWork = Callable[[AsyncConnection, ExecutionRef, Any], Awaitable[dict[str, int]]]


@dataclass(frozen=True)
class Claimant:
    """Who claims a batch's slots: the batch workflow's run, and this activity attempt."""

    workflow_id: str
    run_id: str
    attempt: Attempt | None
    server_now: datetime  # the attempt's scheduled time, for the future-slot check
    now: datetime  # the attempt's start by the server's clock: lateness

    def claim(self, slot: BatchSlot) -> ClaimInput:
        return ClaimInput(
            job_name=slot.job,
            scheduled_at=slot.at,
            origin=slot.origin,
            workflow_id=self.workflow_id,
            run_id=self.run_id,
            due_at=slot.due,
        )


@dataclass(frozen=True)
class BatchSlot:
    schedule_id: int
    at: datetime
    origin: Origin
    kind: str
    params: Any
    due: datetime | None = None  # when its business calendar moved it to (None: at `at`)

    @property
    def job(self) -> str:
        return ledger_name(self.schedule_id)


async def record_skipped(conn: AsyncConnection, claim: ClaimInput, why: str) -> None:
    """The slot's ledger row `skipped` with the reason (a row there already is kept)."""
    fields = claim.model_dump(
        include={"job_name", "scheduled_at", "origin", "workflow_id", "run_id"}
    )
    await conn.execute(_CATCHUP["record_skipped"], fields | {"reason": why})


class WorkRaised(Exception):
    """A slot's work raised in the set-based pass: roll it back, go one by one."""


class Batch:
    """One activity call's slots, worked in `conn`'s transaction (see the module)."""

    def __init__(self, conn: AsyncConnection, work: Mapping[str, SlotWork], who: Claimant):
        self.conn, self.work, self.who = conn, work, who
        self.result = BatchResult()
        self.claimed: list[tuple[BatchSlot, int]] = []  # (slot, execution id), for metrics
        self.completed: list[tuple[BatchSlot, float]] = []  # (slot, duration)

    @staticmethod
    async def slots(conn: AsyncConnection, batch_id: str, after: int) -> list[BatchSlot]:
        cur = await conn.execute(
            _Q["batch_slots"], {"batch_id": batch_id, "after": after, "limit": SLOTS_PER_ACTIVITY}
        )
        return [BatchSlot(*row[:5], due=row[6]) for row in await cur.fetchall()]

    async def set_based(self, slots: list[BatchSlot]) -> None:
        """Claim, work and complete the fresh slots set-based; the others one by one.
        Raises `WorkRaised` (after which the transaction must roll back) if a work raised."""
        horizon = self.who.server_now + _FUTURE_MARGIN
        eligible = [s for s in slots if s.kind in self.work and (s.due or s.at) <= horizon]
        fresh = await self._claim_fresh(eligible)
        works: list[tuple[BatchSlot, int, int, dict[str, int]]] = []
        for slot in eligible:
            if (taken := fresh.get((slot.job, slot.at))) is None:
                continue
            execution_id, token = taken
            activity.heartbeat(len(works))
            await journal.enter(self.conn, execution_id, token)
            try:
                counts = await self._work(slot, execution_id)
            except (StaleAttemptError, psycopg.OperationalError):
                raise
            except Exception as exc:
                raise WorkRaised from exc
            works.append((slot, execution_id, token, counts))
        await self._complete(works)
        for slot in slots:
            if (slot.job, slot.at) not in fresh:
                await self.one(slot)

    async def _claim_fresh(self, slots: list[BatchSlot]) -> dict[tuple[str, datetime], tuple]:
        """ONE statement: a running ledger row per slot not claimed before, taken over
        under this attempt's token; {(job, slot): (execution id, token)}."""
        if not slots:
            return {}
        attempt = self.who.attempt
        params = {
            "jobs": [s.job for s in slots],
            "slots": [s.at for s in slots],
            "origins": [s.origin for s in slots],
            "workflow_id": self.who.workflow_id,
            "run_id": self.who.run_id,
            "holder": holder_name(),
            "activity_seq": attempt.activity_seq if attempt else None,
            "temporal_attempt": attempt.number if attempt else None,
        }
        cur = await self.conn.execute(_Q["claim_batch"], params)
        rows = await cur.fetchall()
        by_key = {(s.job, s.at): s for s in slots}
        for execution_id, job, at, _ in rows:
            self.claimed.append((by_key[(job, at)], execution_id))
        return {(job, at): (execution_id, token) for execution_id, job, at, token in rows}

    async def _work(self, slot: BatchSlot, execution_id: int) -> dict[str, int]:
        execution = ExecutionRef(execution_id=execution_id, job_name=slot.job, scheduled_at=slot.at)
        with runtime_kind(slot.kind):
            return await self.work[slot.kind](self.conn, execution, slot.params)

    async def _complete(self, works: list[tuple[BatchSlot, int, int, dict[str, int]]]) -> None:
        """ONE statement: every worked slot completed with its counts, each journaled."""
        if not works:
            return
        cur = await self.conn.execute(
            _Q["complete_batch"],
            {
                "ids": [execution_id for _, execution_id, _, _ in works],
                "results": [Jsonb({"counts": counts}) for *_, counts in works],
            },
        )
        seconds = dict(await cur.fetchall())
        for slot, execution_id, _, _ in works:
            self.completed.append((slot, float(seconds[execution_id])))
        self.result.completed += len(works)

    async def one(self, slot: BatchSlot) -> None:
        """One slot in a savepoint: settled already, skipped (no batch work for its kind
        here), claimed and worked, or its work raised and it is recorded failed alone."""
        outcome = await self._one(slot)
        setattr(self.result, outcome, getattr(self.result, outcome) + 1)
        activity.heartbeat(outcome)

    async def _one(self, slot: BatchSlot) -> str:
        try:
            async with self.conn.transaction():
                cur = await self.conn.execute(
                    _Q["settled"], {"job_name": slot.job, "scheduled_at": slot.at}
                )
                if await cur.fetchone() is not None:
                    return "already"
                if slot.kind not in self.work:
                    why = f"kind {slot.kind} does not run in batches on this worker"
                    await record_skipped(self.conn, self.who.claim(slot), why)
                    return "skipped"
                return await self._claim_and_work(slot)
        except (StaleAttemptError, psycopg.OperationalError):
            raise  # a newer attempt holds the batch's slots, or the database is away
        except Exception as exc:  # the kind's work failed for this slot alone
            async with self.conn.transaction():
                await self._fail(slot, exc)
            return "failed"

    async def _claim(self, slot: BatchSlot) -> int | None:
        """`claim_in` for one slot: its execution id if this run holds it now."""
        claim = await claim_in(
            self.conn, self.who.claim(slot), server_now=self.who.server_now, now=self.who.now
        )
        return claim.execution_id if claim.outcome == "claimed" else None

    async def _claim_and_work(self, slot: BatchSlot) -> str:
        if (execution_id := await self._claim(slot)) is None:
            return "already"
        taken = await take_over_in(self.conn, execution_id, self.who.attempt)
        if not isinstance(taken, Fence):
            return "already"
        await journal.enter(self.conn, execution_id, taken.token)
        counts = await self._work(slot, execution_id)
        duration = await taken.complete(self.conn, {"counts": counts}, {"counts": counts})
        await journal.record(self.conn, execution_id, taken.token, "complete")
        self.completed.append((slot, duration))
        return "completed"

    async def _fail(self, slot: BatchSlot, exc: Exception) -> None:
        """Record one slot failed (its work's savepoint was rolled back)."""
        activity.logger.warning(
            "batch slot failed", extra={"job": slot.job, "slot": slot.at.isoformat()}
        )
        if (execution_id := await self._claim(slot)) is not None:
            error = redact.scrub(f"{type(exc).__name__}: {exc}")
            cur = await self.conn.execute(
                _EXECUTIONS["fail"],
                {"id": execution_id, "run_id": self.who.run_id, "error": error, "attempts": None},
            )
            if await cur.fetchone() is not None:
                note = await auto_pause_in(self.conn, slot.job)
                await notices.failed_in(self.conn, slot.job, slot.at, error, note)

    def record_metrics(self) -> None:
        """After the commit, so each is counted once: the claims' lateness, completions."""
        for slot, execution_id in self.claimed:
            with runtime_kind(slot.kind):
                lateness = (self.who.now - slot.at).total_seconds()
                record_claim(slot.job, execution_id, lateness, skipped=False)
        for slot, duration in self.completed:
            with runtime_kind(slot.kind):
                record_completed(slot.job, duration)
