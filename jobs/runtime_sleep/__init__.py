"""`test-sleep`, a runtime kind of the benches (declared here, so the workers run it and
`schedules.tenants` accepts it): a slot whose work takes `seconds` (a job that waits on
something), held by no transaction while it waits. Each slot runs on its own
(`RuntimeRunWorkflow`): the noisy neighbour's slots (bench/noisy_neighbour.py)."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, ConfigDict, Field

from activities.chunks.chunked import begin_attempt, fenced
from activities.common.models import WorkInput, WorkResult
from activities.common.telemetry import record_completed
from activities.run.kinds import JobKind, PoolActivities, RuntimeKind


class SleepParams(BaseModel):
    """How long a slot's work takes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seconds: float = Field(default=1.0, ge=0, le=300)


class SleepActivities(PoolActivities):
    async def run_sleep(self, work: WorkInput, params: SleepParams) -> WorkResult:
        """Take the slot over, wait `seconds` (no connection held), complete it."""
        execution = work.execution
        fence = await begin_attempt(self.pool, execution)
        if isinstance(fence, WorkResult):
            return fence
        await asyncio.sleep(params.seconds)
        counts = {"slept": 1}
        async with fenced(self.pool, fence, execution, "complete") as conn:
            duration = await fence.complete(conn, {"counts": counts}, {"counts": counts})
        record_completed(execution.job_name, duration)
        return WorkResult(counts=counts)


KINDS = (
    JobKind(
        "test-sleep",
        SleepActivities,
        activity="run_sleep",
        description="waits `seconds`, then completes: for the benches of runtime schedules",
    ),
)
RUNTIME_KINDS = (RuntimeKind.of(KINDS[0]),)
