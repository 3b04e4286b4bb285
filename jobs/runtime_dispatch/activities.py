"""The dispatcher job's work: a session of its shard's ticks, recorded as the job's own slot.

The run takes its own slot over (its fencing token), ticks with its scheduled time as the
clock (`activities.runtime.dispatch.Dispatcher.tick`), then, for a session (`max_seconds` > 0),
ticks again whenever its shard has a slot due until the session ends
(`jobs.runtime_dispatch.session`), and completes with the ticks' counts summed. The
tick is safe without the token: its decisions are ordered by row locks, its starts are
idempotent, so a retried or duplicated dispatcher run only finishes what another began.
"""

from __future__ import annotations

from typing import Any

from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, Field
from temporalio import activity

from activities.chunks.chunked import begin_attempt, fenced
from activities.chunks.gate import pass_chunk_gate
from activities.claim.heartbeat import activity_heartbeat
from activities.common.models import WorkInput, WorkResult
from activities.common.telemetry import record_completed
from activities.runtime.dispatch import Dispatcher
from activities.runtime.start_gate import StartGate
from activities.runtime.tenant_limits import TenantDefaults
from core.wakeups import session_end
from jobs.runtime_dispatch.session import Session


class DispatchParams(BaseModel):
    shard: int = Field(ge=0, lt=16)
    # The session's length from the run's time, cut short before the job's next fire time
    # (`core.wakeups.session_end`); 0: one tick and done.
    max_seconds: float = Field(default=0.0, ge=0, le=24 * 3600)
    # While idle, read the shard's next due time again at least this often (a lost
    # wake-up costs at most this).
    recheck_seconds: float = Field(default=30.0, gt=0, le=600)


def batch_kinds() -> frozenset[str]:
    """The runtime kinds whose slots run in batches (`RuntimeKind.batch`)."""
    from jobs import runtime_kinds  # the job packages, found by looking (this one among them)

    return frozenset(name for name, kind in runtime_kinds().items() if kind.batch)


class DispatchActivities:
    """The dispatcher's activity; built by the worker with its pool."""

    def __init__(self, pool: AsyncConnectionPool, settings: Any) -> None:
        self.pool = pool
        # The runs start on the fleet's task queue; this activity runs on its dispatch
        # queue (`core.queues`).
        self.task_queue: str = settings.temporal_task_queue
        # One gate for every shard this process ticks: at most START_CONCURRENCY starts
        # in flight, as one client would have (bench/RESULTS.md, runtime herd), taken
        # fairly across tenants (`activities.runtime.start_gate`).
        self.start_gate = StartGate()
        self.limits = TenantDefaults.of(settings)

    async def dispatch_runtime_shard(self, work: WorkInput, params: DispatchParams) -> WorkResult:
        """Dispatch the shard's slots due by this run's scheduled time."""
        execution = work.execution
        fence = await begin_attempt(self.pool, execution)
        if isinstance(fence, WorkResult):
            return fence
        dispatcher = Dispatcher(
            self.pool,
            activity.client(),
            self.task_queue,
            batch_kinds(),
            heartbeat=activity_heartbeat,
            after_decide=lambda: pass_chunk_gate(self.pool, {}),
            start_gate=self.start_gate,
            limits=self.limits,
        )
        end = session_end(execution.scheduled_at, work.timing, params.max_seconds)
        session = Session(self.pool, dispatcher, params.shard, end, params.recheck_seconds)
        counts = await session.run(execution.scheduled_at)
        async with fenced(self.pool, fence, execution, "complete") as conn:
            duration = await fence.complete(conn, {"counts": counts}, {"counts": counts})
        record_completed(execution.job_name, duration)
        return WorkResult(counts=counts)
