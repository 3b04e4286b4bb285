"""The weekly report of one customer, for one slot: one statement, one transaction.

The week is the customer's: the seven local days before the slot, computed by PostgreSQL in
the customer's zone (167 hours across a spring-forward, 169 across a fall-back), so a late,
retried or backfilled run reports exactly its own week. The report row and its email (an
outbox row keyed by the slot) commit with the slot's completion, under its fencing token.
"""

from __future__ import annotations

from psycopg import AsyncConnection
from pydantic import BaseModel, ConfigDict, Field

from activities.common.models import ExecutionRef, WorkInput, WorkResult
from activities.run.kinds import PoolActivities
from activities.runtime.runs import run_slot
from core.sql import queries

_Q = queries(__package__, "queries")


class WeeklyReportParams(BaseModel):
    """The schedule's params: whose week (a `customers` row)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    customer_id: int = Field(ge=1)


class WeeklyReportActivities(PoolActivities):
    """Built by the worker with its connection pool."""

    async def report_in(
        self, conn: AsyncConnection, execution: ExecutionRef, params: WeeklyReportParams
    ) -> dict[str, int]:
        """In `conn`'s transaction: the customer's week summed, reported and emailed."""
        slot = execution.scheduled_at
        cur = await conn.execute(
            _Q["report"],
            {
                "customer_id": params.customer_id,
                "slot": slot,
                "execution_id": execution.execution_id,
                "job_name": execution.job_name,
                "stamp": f"{slot:%Y-%m-%dT%H:%M:%SZ}",
            },
        )
        reports, emails, logins, orders, net = await cur.fetchone()
        return {
            "reports": reports,
            "emails": emails,
            "logins": logins,
            "orders": orders,
            "net_cents": net,
        }

    async def send_weekly_report(self, work: WorkInput, params: WeeklyReportParams) -> WorkResult:
        """One slot's report: take over, report, email and complete in one transaction."""
        return await run_slot(self.pool, work, self.report_in, params)
