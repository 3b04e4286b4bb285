"""Nightly reconciliation: the ledger against the card payments settled, one local day a run.

A run reconciles the local day *before* its scheduled time, in the ledger's time zone, so a
late, retried or backfilled run checks exactly its own night's day, never "yesterday" as of
when it happens to run. The day is a range of local midnights converted to UTC instants: 23
hours on the spring-forward day, 25 on the fall-back day, and a payment settled at 23:30 local
belongs to that day whatever the UTC date. The totals, the stored row and (over the threshold)
one `ReconciliationAlert` outbox message commit with the take-over and the completion mark,
in one transaction (`activities.chunks.chunked.run_in_one_transaction`).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from psycopg import AsyncConnection
from pydantic import BaseModel, Field, field_validator

from activities.chunks.chunked import Progress, run_in_one_transaction
from activities.common.models import ExecutionRef, WorkInput, WorkResult
from activities.run.kinds import PoolActivities
from core.sql import queries
from timing.zones import ZoneInfo, ZoneInfoNotFoundError

_Q = queries(__package__, "queries")


class ReconcileParams(BaseModel):
    """The job's typed input, set in its catalog entry."""

    # An absolute discrepancy above this (in cents) raises one alert for the day.
    threshold_cents: int = Field(default=0, ge=0)
    currency: str = Field(default="USD", pattern=r"^[A-Z]{3}$")
    # The zone of the ledger's business days (`booked_on`). A property of the books, not of
    # the schedule, though the job usually runs in the same zone.
    ledger_timezone: str = "America/New_York"

    @field_validator("ledger_timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"is not a known IANA time zone: {value!r}") from None
        return value


class DayWindow(BaseModel):
    """A local day and the UTC instants it spans: [start, end)."""

    day: date
    start: datetime
    end: datetime


def start_of_day(day: date, zone: ZoneInfo) -> datetime:
    """The first instant (in UTC) whose local date is `day`.

    Local midnight is usually it. Where a clock change falls at midnight, midnight may not
    exist (the day starts at 01:00) or happen twice (the first is still the day before):
    of the two readings of midnight, the earliest that is really on `day` wins.
    """
    # In UTC: aware datetimes sharing a tzinfo compare by wall time, ignoring `fold`.
    readings = (_utc(datetime.combine(day, time(), zone).replace(fold=fold)) for fold in (0, 1))
    return min(t for t in readings if t.astimezone(zone).date() == day)


def previous_local_day(scheduled_at: datetime, timezone: str) -> DayWindow:
    """The local day before the one `scheduled_at` falls on, in `timezone`."""
    zone = ZoneInfo(timezone)
    day = scheduled_at.astimezone(zone).date() - timedelta(days=1)
    return DayWindow(
        day=day,
        start=start_of_day(day, zone),
        end=start_of_day(day + timedelta(days=1), zone),
    )


def _utc(instant: datetime) -> datetime:
    return instant.astimezone(UTC)


async def reconcile_day(
    conn: AsyncConnection, window: DayWindow, params: ReconcileParams, slot: dict[str, Any]
) -> dict[str, int]:
    """Store the day's totals and alert over the threshold; return the counts."""
    cur = await conn.execute(
        _Q["reconcile_day"],
        slot
        | {
            "day": window.day,
            "day_start": window.start,
            "day_end": window.end,
            "currency": params.currency,
            "threshold_cents": params.threshold_cents,
        },
    )
    ledger_total, payments_total, stored, alerted = await cur.fetchone()
    return {
        "ledger_total": ledger_total,
        "payments_total": payments_total,
        "discrepancy": ledger_total - payments_total,
        "stored": stored,
        "alerts": alerted,
    }


class ReconcileActivities(PoolActivities):
    """Reconciliation activities; built by the worker with its connection pool."""

    async def reconcile_in(
        self, conn: AsyncConnection, execution: ExecutionRef, params: ReconcileParams
    ) -> dict[str, int]:
        """In `conn`'s transaction: the local day before the slot's time reconciled, its
        totals stored and its alert written to the outbox (the kind's `slot_work`)."""
        window = previous_local_day(execution.scheduled_at, params.ledger_timezone)
        slot = {"job_name": execution.job_name, "scheduled_at": execution.scheduled_at}
        return await reconcile_day(conn, window, params, slot)

    async def reconcile_ledger(self, work: WorkInput, params: ReconcileParams) -> WorkResult:
        """Reconcile the local day before the slot's time, once per slot: a slot claimed
        before the work (a run begun by `begin_run`). A run that begins in its work
        activity plans, claims and reconciles in one transaction (`reconcile_in`)."""
        execution = work.execution
        window = previous_local_day(execution.scheduled_at, params.ledger_timezone)

        async def plan(conn: AsyncConnection) -> Progress:
            return {"cursor": {"day": window.day.isoformat()}, "counts": {}}

        async def step(conn: AsyncConnection, progress: Progress) -> tuple[Progress, bool]:
            return progress | {"counts": await self.reconcile_in(conn, execution, params)}, True

        # One statement: the take-over, the day's totals, its alert and the completion
        # commit in one transaction.
        return await run_in_one_transaction(self.pool, execution, plan, step)
