"""The activities of runtime schedules' runs (issue 21): begin a slot, run a batch.

A slot of a runtime schedule is claimed exactly as a catalog job's (`claim_in`: the
`job_executions` row `rt-<id>` at the slot, its origin, the run that holds it) and worked by
its kind's own activity under the fencing token (`activities.chunks.chunked`). Kinds that opt in
(`RuntimeKind.batch`, `JobKind.slot_work`) run in batches instead: one activity call works
up to `SLOTS_PER_ACTIVITY` light slots in ONE transaction, claimed and completed set-based,
each slot still under its own ledger row, token and outbox rows (`activities.runtime.batch`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row
from psycopg_pool import AsyncConnectionPool
from temporalio import activity

from activities.chunks.chunked import run_in_one_transaction
from activities.chunks.gate import pass_chunk_gate
from activities.claim.executions import Attempt, claim_in
from activities.claim.heartbeat import heartbeating
from activities.common.models import ClaimInput, WorkInput, WorkResult
from activities.common.telemetry import runtime_kind
from activities.runtime.batch import (
    SLOTS_PER_ACTIVITY,
    Batch,
    Claimant,
    SlotWork,
    WorkRaised,
    record_skipped,
)
from activities.runtime.models import (
    BatchInput,
    BatchResult,
    RuntimeBegin,
    RuntimeBegun,
    RuntimeWork,
    ScheduleRow,
    ledger_name,
)
from core.sql import queries

__all__ = ["RuntimeActivities", "RuntimeKinds", "SlotWork", "run_slot"]

_Q = queries("activities.runtime", "runtime")


async def run_slot(
    pool: AsyncConnectionPool, work: WorkInput, slot_work: SlotWork, params: Any
) -> WorkResult:
    """A runtime kind's slot run on its own (`RuntimeRunWorkflow`): its in-transaction work
    (`JobKind.slot_work`, what a batch runs), taken over, done and completed in ONE
    transaction (`activities.chunks.chunked.run_in_one_transaction`)."""

    async def plan(conn: AsyncConnection) -> dict[str, Any]:
        return {"counts": {}}

    async def step(conn: AsyncConnection, progress: dict[str, Any]):
        return {"counts": await slot_work(conn, work.execution, params)}, True

    return await run_in_one_transaction(pool, work.execution, plan, step)


class RuntimeKinds:
    """What the runtime activities need of the job kinds, given by the worker (the
    engine does not import `jobs/`): each kind's work activity and params model, the
    in-transaction work of those that run in batches, and how each kind's slots are timed
    and retried (its `activities.run.kinds.RuntimeKind`: `timeout`, `heartbeat`, `attempts`;
    `RuntimeWork`'s defaults for a kind not given)."""

    def __init__(
        self,
        activities: Mapping[str, str],
        params: Mapping[str, type],
        batch: Mapping[str, SlotWork] | None = None,
        timing: Mapping[str, Any] | None = None,
    ) -> None:
        self.activities = dict(activities)
        self.params = dict(params)
        self.batch = dict(batch or {})
        self.timing = dict(timing or {})

    def timed(self, kind: str) -> dict[str, Any]:
        """`RuntimeWork`'s timeouts and attempts for a slot of `kind`."""
        declared = self.timing.get(kind)
        if declared is None:
            return {}
        return {
            "start_to_close_seconds": declared.timeout.total_seconds(),
            "heartbeat_seconds": declared.heartbeat.total_seconds(),
            "maximum_attempts": declared.attempts,
        }


class RuntimeActivities:
    """`begin_runtime_run` and `run_runtime_batch`; built by the worker with its pool."""

    def __init__(self, pool: AsyncConnectionPool, kinds: RuntimeKinds):
        self.pool = pool
        self.kinds = kinds

    @activity.defn
    async def begin_runtime_run(self, begin: RuntimeBegin) -> RuntimeBegun:
        """Read the slot's schedule and claim the slot, in one transaction (a local
        activity of `RuntimeRunWorkflow`, safe to repeat as `begin_run` is)."""
        run = begin.run
        claim = ClaimInput(
            job_name=ledger_name(run.schedule_id),
            scheduled_at=run.scheduled_at,
            origin=run.origin,
            workflow_id=begin.workflow_id,
            run_id=begin.run_id,
        )
        async with self.pool.connection() as conn, conn.transaction():
            async with conn.cursor(row_factory=class_row(ScheduleRow)) as cur:
                await cur.execute(_Q["schedule"], {"id": run.schedule_id, "slot": run.scheduled_at})
                row = await cur.fetchone()
            # A slot decided before its schedule was deleted still runs: a delete never
            # interrupts a run (the dispatcher decides no later slot).
            if row is None or row.kind not in self.kinds.activities:
                why = f"unknown runtime schedule or kind (schedule {run.schedule_id})"
                await record_skipped(conn, claim, why)
                return RuntimeBegun(job_name=claim.job_name, outcome="skipped", reason=why)
            claim.due_at = row.due_at  # a slot its business calendar moved is claimed then
            with runtime_kind(row.kind):
                claimed = await claim_in(
                    conn, claim, server_now=begin.server_now, now=begin.server_now
                )
        work = RuntimeWork(
            activity=self.kinds.activities[row.kind],
            params=row.params or {},
            timing=row.timing(),
            depends_on=row.depends_on or [],
            tenant=row.tenant,
            **self.kinds.timed(row.kind),
        )
        return RuntimeBegun(
            execution_id=claimed.execution_id,
            outcome=claimed.outcome,
            reason=claimed.reason,
            job_name=claim.job_name,
            work=work if claimed.outcome == "claimed" else None,
        )

    @activity.defn
    async def run_runtime_batch(self, batch: BatchInput) -> BatchResult:
        """Work the next `SLOTS_PER_ACTIVITY` slots of a batch in one transaction: the
        fresh ones set-based, the others one by one (`activities.runtime.batch`)."""
        info = activity.info()
        who = Claimant(
            info.workflow_id,
            info.workflow_run_id,
            Attempt.current(),
            info.current_attempt_scheduled_time,
            info.started_time,  # the server's clock, never this worker's: lateness
        )
        await pass_chunk_gate(self.pool, batch.after)  # test-only; a no-op unless set
        # Heartbeating while its transaction waits (a lock, a slow statement): the batch's
        # heartbeat times out a lost worker's attempt, never a live one's.
        done, handled = await heartbeating(self._batch(batch, who))
        done.record_metrics()  # after the commit: counted once
        return done.result.model_copy(
            update={"handled": batch.after + handled, "done": handled < SLOTS_PER_ACTIVITY}
        )

    async def _batch(self, batch: BatchInput, who: Claimant) -> tuple[Batch, int]:
        """The batch's next slots worked in one transaction; how many there were."""
        async with self.pool.connection() as conn:
            try:
                async with conn.transaction():
                    slots = await Batch.slots(conn, batch.batch_id, batch.after)
                    done = Batch(conn, self.kinds.batch, who)
                    await done.set_based(slots)
            except WorkRaised:  # rolled back whole: each slot in a savepoint of its own
                async with conn.transaction():
                    slots = await Batch.slots(conn, batch.batch_id, batch.after)
                    done = Batch(conn, self.kinds.batch, who)
                    for slot in slots:
                        await done.one(slot)
        return done, len(slots)
