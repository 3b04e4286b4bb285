"""The activities of runtime schedules' runs (issue 21): begin a slot, run a batch.

A slot of a runtime schedule is claimed exactly as a catalog job's (`claim_in`: the
`job_executions` row `rt-<id>` at the slot, its origin, the run that holds it) and worked by
its kind's own activity under the fencing token (`activities.chunked`). Kinds that opt in
(`RuntimeKind.batch`, `JobKind.slot_work`) run in batches instead: one activity call works
up to `SLOTS_PER_ACTIVITY` light slots in ONE transaction (one commit, not one per slot),
each slot in a savepoint of its own that claims the slot, takes it over (the attempt's
fencing token, in the take-over order of `activities.executions.Attempt`), does the kind's
work, writes its outbox rows, journals and completes: each slot still under its own ledger
row and token. A slot whose work raises rolls back to its savepoint and is recorded
`failed`; a stale attempt (`StaleAttemptError`) or a lost database rolls the whole call
back, and the activity's retry does it again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from temporalio import activity

from activities import journal
from activities.chunk_gate import pass_chunk_gate
from activities.executions import (
    Attempt,
    Clock,
    Fence,
    StaleAttemptError,
    claim_in,
    take_over_in,
    utcnow,
)
from activities.models import ClaimInput, ExecutionRef, Origin
from activities.runtime_models import (
    BatchInput,
    BatchResult,
    RuntimeBegin,
    RuntimeBegun,
    RuntimeWork,
    ledger_name,
)
from activities.telemetry import record_completed, runtime_kind
from core import redact
from core.sql import queries

_Q = queries("activities.sql", "runtime")
_EXECUTIONS = queries("activities.sql", "executions")
_CATCHUP = queries("activities.sql", "catchup")

SLOTS_PER_ACTIVITY = 100  # a batch's slots per activity call: each call heartbeats

# One slot's work inside the transaction that claims and completes it: its counts.
SlotWork = Callable[[AsyncConnection, ExecutionRef, Any], Awaitable[dict[str, int]]]


class RuntimeKinds:
    """What the runtime activities need of the job kinds, given by the worker (the
    engine does not import `jobs/`): each kind's work activity and params model, and
    the in-transaction work of those that run in batches."""

    def __init__(
        self,
        activities: Mapping[str, str],
        params: Mapping[str, type],
        batch: Mapping[str, SlotWork] | None = None,
    ) -> None:
        self.activities = dict(activities)
        self.params = dict(params)
        self.batch = dict(batch or {})


class RuntimeActivities:
    """`begin_runtime_run` and `run_runtime_batch`; built by the worker with its pool."""

    def __init__(self, pool: AsyncConnectionPool, kinds: RuntimeKinds, clock: Clock = utcnow):
        self.pool = pool
        self.kinds = kinds
        self.clock = clock

    @activity.defn
    async def begin_runtime_run(self, begin: RuntimeBegin) -> RuntimeBegun:
        """Read the slot's schedule and claim the slot, in one transaction (a local
        activity of `RuntimeRunWorkflow`, safe to repeat as `begin_run` is)."""
        run = begin.run
        job_name = ledger_name(run.schedule_id)
        async with self.pool.connection() as conn, conn.transaction():
            cur = await conn.execute(_Q["schedule"], {"id": run.schedule_id})
            row = await cur.fetchone()
            # A slot decided before its schedule was deleted still runs: a delete never
            # interrupts a run (the dispatcher decides no later slot).
            if row is None or row[3] not in self.kinds.activities:
                why = f"unknown runtime schedule or kind (schedule {run.schedule_id})"
                await self._skip(conn, job_name, run.scheduled_at, begin, why)
                return RuntimeBegun(job_name=job_name, outcome="skipped", reason=why)
            _, tenant, _, kind, cron, zone, params, start_at, end_at, _, depends_on = row
            with runtime_kind(kind):
                claim = await claim_in(
                    conn,
                    self._claim(job_name, run.scheduled_at, run.origin, begin),
                    server_now=begin.server_now,
                    now=self.clock(),
                )
        work = RuntimeWork(
            activity=self.kinds.activities[kind],
            params=params or {},
            timing={"cron": cron, "timezone": zone, "start_at": start_at, "end_at": end_at},
            depends_on=depends_on or [],
            tenant=tenant,
        )
        return RuntimeBegun(
            execution_id=claim.execution_id,
            outcome=claim.outcome,
            reason=claim.reason,
            job_name=job_name,
            work=work if claim.outcome == "claimed" else None,
        )

    @staticmethod
    def _claim(job: str, slot: datetime, origin: Origin, begin: Any) -> ClaimInput:
        return ClaimInput(
            job_name=job,
            scheduled_at=slot,
            origin=origin,
            workflow_id=begin.workflow_id,
            run_id=begin.run_id,
        )

    async def _skip(
        self, conn: AsyncConnection, job: str, slot: datetime, begin: RuntimeBegin, why: str
    ) -> None:
        await conn.execute(
            _CATCHUP["record_skipped"],
            {
                "job_name": job,
                "scheduled_at": slot,
                "origin": begin.run.origin,
                "workflow_id": begin.workflow_id,
                "run_id": begin.run_id,
                "reason": why,
            },
        )

    @activity.defn
    async def run_runtime_batch(self, batch: BatchInput) -> BatchResult:
        """Work the next `SLOTS_PER_ACTIVITY` slots of a batch in one transaction, each slot
        in a savepoint of its own (see the module)."""
        info = activity.info()
        result = BatchResult(handled=batch.after)
        begin = _BatchClaim(info.workflow_id, info.workflow_run_id)
        attempt = Attempt.current()
        await pass_chunk_gate(self.pool, batch.after)  # test-only; a no-op unless set
        completed: list[tuple[str, str, float]] = []
        async with self.pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                _Q["batch_slots"],
                {"batch_id": batch.batch_id, "after": batch.after, "limit": SLOTS_PER_ACTIVITY},
            )
            slots = await cur.fetchall()
            for schedule_id, slot, origin, kind, params, _ in slots:
                what = (ledger_name(schedule_id), slot, origin, kind)
                with runtime_kind(kind):
                    outcome = await self._batch_slot(conn, what, begin, params, attempt)
                if isinstance(outcome, float):
                    completed.append((what[0], kind, outcome))
                    outcome = "completed"
                setattr(result, outcome, getattr(result, outcome) + 1)
                result.handled += 1
                activity.heartbeat(result.handled)
        for job, kind, duration in completed:  # after the commit: counted once
            with runtime_kind(kind):
                record_completed(job, duration)
        result.done = len(slots) < SLOTS_PER_ACTIVITY
        return result

    async def _batch_slot(
        self,
        conn: AsyncConnection,
        what: tuple[str, datetime, Origin, str],
        begin: _BatchClaim,
        params: Any,
        attempt: Attempt | None,
    ) -> str | float:
        """One slot of a batch, in a savepoint: claim, take over, work, complete. Its
        duration when it completed, else what happened ("already", "skipped", "failed")."""
        job, slot, origin, kind = what
        work = self.kinds.batch.get(kind)
        try:
            async with conn.transaction():
                cur = await conn.execute(_Q["settled"], {"job_name": job, "scheduled_at": slot})
                if await cur.fetchone() is not None:
                    return "already"
                if work is None:
                    why = f"kind {kind} does not run in batches on this worker"
                    skip = RuntimeBegin.model_construct(
                        run=_Run(origin), workflow_id=begin.workflow_id, run_id=begin.run_id
                    )
                    await self._skip(conn, job, slot, skip, why)
                    return "skipped"
                return await self._work_slot(conn, what, begin, params, attempt)
        except StaleAttemptError:
            raise  # a newer attempt of this batch holds its slots: this one commits nothing
        except psycopg.OperationalError:
            raise  # the database is away: the activity is retried
        except Exception as exc:  # the kind's work failed for this slot alone
            async with conn.transaction():
                await self._fail_slot(conn, what, begin, exc)
            return "failed"

    async def _work_slot(
        self,
        conn: AsyncConnection,
        what: tuple[str, datetime, Origin, str],
        begin: _BatchClaim,
        params: Any,
        attempt: Attempt | None,
    ) -> str | float:
        job, slot, origin, kind = what
        claim = await claim_in(
            conn,
            self._claim(job, slot, origin, begin),
            server_now=activity.info().current_attempt_scheduled_time,
            now=self.clock(),
        )
        if claim.outcome != "claimed":
            return "already" if claim.outcome == "completed" else "skipped"
        taken = await take_over_in(conn, claim.execution_id, attempt)
        if not isinstance(taken, Fence):
            return "already"
        execution = ExecutionRef(execution_id=claim.execution_id, job_name=job, scheduled_at=slot)
        await journal.enter(conn, taken.execution_id, taken.token)
        counts = await self.kinds.batch[kind](conn, execution, params)
        duration = await taken.complete(conn, {"counts": counts}, {"counts": counts})
        await journal.record(conn, taken.execution_id, taken.token, "complete")
        return duration

    async def _fail_slot(
        self,
        conn: AsyncConnection,
        what: tuple[str, datetime, Origin, str],
        begin: _BatchClaim,
        exc: Exception,
    ) -> None:
        """Record one slot of a batch failed (its work's savepoint was rolled back)."""
        job, slot, origin, _ = what
        activity.logger.warning("batch slot failed", extra={"job": job, "slot": slot.isoformat()})
        claim = await claim_in(
            conn,
            self._claim(job, slot, origin, begin),
            server_now=activity.info().current_attempt_scheduled_time,
            now=self.clock(),
        )
        if claim.outcome == "claimed":
            await conn.execute(
                _EXECUTIONS["fail"],
                {
                    "id": claim.execution_id,
                    "run_id": begin.run_id,
                    "error": redact.scrub(f"{type(exc).__name__}: {exc}"),
                },
            )


class _BatchClaim:
    def __init__(self, workflow_id: str, run_id: str) -> None:
        self.workflow_id = workflow_id
        self.run_id = run_id


class _Run:
    def __init__(self, origin: Origin) -> None:
        self.origin = origin
