"""`test-noop`, the runtime kind of the tests and benches (declared here, so the workers run
it and `schedules.tenants` accepts it): a slot recorded like any other, with no work. It
runs in batches, so a herd of its slots measures the engine, not a job."""

from __future__ import annotations

from psycopg import AsyncConnection
from pydantic import BaseModel, ConfigDict, Field

from activities.common.models import ExecutionRef, WorkInput, WorkResult
from activities.run.kinds import JobKind, PoolActivities, RuntimeKind
from activities.runtime.runs import run_slot


class NoopParams(BaseModel):
    """A label and a size, so validation has something to refuse."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str = Field(default="", max_length=200)
    size: int = Field(default=1, ge=1, le=1000)


class NoopActivities(PoolActivities):
    async def noop_in(
        self, conn: AsyncConnection, execution: ExecutionRef, params: NoopParams
    ) -> dict[str, int]:
        """One slot's (empty) work, inside the transaction that claims and completes it."""
        return {"noop": 1}

    async def run_noop(self, work: WorkInput, params: NoopParams) -> WorkResult:
        """A slot run on its own (a trigger, a backfill): the same, in one transaction."""
        return await run_slot(self.pool, work, self.noop_in, params)


KINDS = (
    JobKind(
        "test-noop",
        NoopActivities,
        activity="run_noop",
        slot_work="noop_in",
        description="does nothing: for the tests and benches of runtime schedules",
    ),
)
RUNTIME_KINDS = (RuntimeKind.of(KINDS[0], batch=True),)
