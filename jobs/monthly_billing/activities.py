"""Monthly billing's steps: open the month, invoice every subscription, charge, send receipts.

A run scheduled on the 1st bills the *previous* month, in the job's time zone: a late,
retried or backfilled run bills exactly its own month. Each step is idempotent and recorded
under the run's execution (`activities/steps/record.py`):

1. `open_billing_run`: the month's `billing_runs` row, one per (job, month); a second is
   refused. A subscription is invoiced once a month whatever the job: each run works on
   the invoices its own job made.
2. `generate_invoices`: one invoice per subscription active in the month, unique per
   (subscription, month), set-based, one id range per fenced transaction.
3. `charge_invoices`: each invoice charged through the payment provider
   (`jobs/monthly_billing/provider.py`) with its number as the `Idempotency-Key`, a batch at
   a time, no transaction open while a request is on the wire; the answers (charged or
   declined) are recorded in one fenced transaction per batch. A stale attempt may repeat a
   request, always with the same key, and records nothing. A charge whose answer never
   came stays pending until the provider answers for it: a later request that is refused
   (even "connection refused") says nothing about the earlier one.
4. `queue_receipts`: a `PaymentReceipt` outbox message per charged invoice, and the
   billing run closed, in one transaction.

Compensations: if charging fails for good (the provider down past its retries) or an
operator cancels the run, `void_uncharged_invoices` looks every pending charge up at the
provider, then voids the month's invoices nobody charged, and `reopen_billing_run` reopens
the month so it can be billed again. Charged invoices stay charged; the compensation's
record lists them.
"""

from __future__ import annotations

import asyncio
import time
from datetime import date, datetime, timedelta
from typing import Any

from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, Field
from temporalio.exceptions import ApplicationError

from activities.steps.record import StepResult, StepRun, uninterrupted
from core.sql import queries
from jobs.monthly_billing.provider import (
    Charge,
    Outcome,
    PaymentProvider,
    ProviderRefused,
    ProviderUnavailable,
)
from timing import zone

_Q = queries(__package__, "queries")

MONTH_BILLED = "MonthAlreadyBilled"


class BillingParams(BaseModel):
    """The job's typed input, set in its catalog entry."""

    chunk_size: int = Field(default=1000, ge=1, le=100_000)  # subscriptions per transaction
    charge_batch: int = Field(default=50, ge=1, le=1000)  # charges between two records
    concurrency: int = Field(default=10, ge=1, le=100)  # charges in flight at once
    # How long one call of a step works before it reports progress to the workflow.
    call_seconds: float = Field(default=10.0, gt=0, le=300)
    due_days: int = Field(default=14, ge=0, le=90)  # invoices fall due this long after the run


def billing_month(scheduled_at: datetime, timezone: str) -> date:
    """The month a run for `scheduled_at` bills: the one before its local date's month."""
    local = scheduled_at.astimezone(zone(timezone)).date()
    return (local.replace(day=1) - timedelta(days=1)).replace(day=1)


def _month_end(month: date) -> date:
    return (month.replace(day=28) + timedelta(days=4)).replace(day=1) - timedelta(days=1)


class BillingActivities:
    """Monthly billing's steps; built by the worker with its pool and settings."""

    def __init__(self, pool: AsyncConnectionPool, settings: Any) -> None:
        self.pool = pool
        self.provider_url = settings.payments_url
        key = settings.payments_api_key
        self.provider_key = key.get_secret_value() if key is not None else None
        self.provider_timeout = settings.payments_timeout_seconds

    def _month(self, step: StepRun) -> date:
        timing = step.input.timing
        return billing_month(step.execution.scheduled_at, timing.timezone if timing else "UTC")

    def _of_job(self, step: StepRun, **more: Any) -> dict[str, Any]:
        """The parameters naming the job's month: its billing run, the invoices it made."""
        return {"job_name": step.execution.job_name, "month": self._month(step), **more}

    async def open_billing_run(self, step: StepRun, params: BillingParams) -> StepResult:
        """Step 1: open the month's billing run; refuse a month another run billed."""
        month = self._month(step)
        execution_id = step.execution.execution_id
        async with step.transaction() as conn:
            cur = await conn.execute(_Q["open_run"], self._of_job(step, execution_id=execution_id))
            if await cur.fetchone() is None:
                cur = await conn.execute(_Q["run_of_month"], self._of_job(step))
                holder, status = await cur.fetchone()
                raise ApplicationError(
                    f"{step.execution.job_name}: {month:%Y-%m} has a billing run already "
                    f"(execution {holder}, {status}); a month is billed once",
                    type=MONTH_BILLED,
                    non_retryable=True,
                )
            return await step.finish(conn, {"months": 1}, {"month": month.isoformat()})

    async def reopen_billing_run(self, step: StepRun, params: BillingParams) -> StepResult:
        """Undo of step 1: reopen the month, so it can be billed again."""
        async with step.transaction() as conn:
            cur = await conn.execute(
                _Q["reopen_run"], self._of_job(step, execution_id=step.execution.execution_id)
            )
            return await step.finish(conn, {"reopened": cur.rowcount})

    async def generate_invoices(self, step: StepRun, params: BillingParams) -> StepResult:
        """Step 2: an invoice per subscription active in the month, an id range at a time."""
        month = self._month(step)
        fixed = self._of_job(
            step,
            month_end=_month_end(month),
            due_date=step.execution.scheduled_at.date() + timedelta(days=params.due_days),
        )
        progress = step.progress
        if not progress:  # the first attempt fixes the bounds: retries cover the same rows
            async with step.transaction() as conn:
                cur = await conn.execute(_Q["subscription_bounds"], fixed)
                upto_id, active = await cur.fetchone()
                progress = {
                    "after_id": 0,
                    "upto_id": upto_id,
                    "active": active,
                    "counts": {"invoices": 0, "revived": 0},
                }
                await step.save(conn, progress)
        deadline = time.monotonic() + params.call_seconds
        while True:
            after_id, upto_id = progress["after_id"], progress["upto_id"]
            counts = progress["counts"]
            async with step.transaction() as conn:
                if after_id >= upto_id:
                    return await step.finish(conn, counts, items=progress["active"])
                high = min(after_id + params.chunk_size, upto_id)
                cur = await conn.execute(
                    _Q["generate_chunk"], fixed | {"after_id": after_id, "upto_id": high}
                )
                created, revived = await cur.fetchone()
                progress = progress | {
                    "after_id": high,
                    "counts": {
                        "invoices": counts["invoices"] + created + revived,
                        "revived": counts["revived"] + revived,
                    },
                }
                await step.save(conn, progress)
            if time.monotonic() > deadline and high < upto_id:
                return step.more(
                    progress["counts"],
                    items_done=progress["counts"]["invoices"],
                    items_total=progress["active"],
                )

    async def void_uncharged_invoices(self, step: StepRun, params: BillingParams) -> StepResult:
        """Undo of step 2: void the month's invoices nobody charged; charged ones stay.

        A charge still pending (its attempt died before the answer was recorded) is looked
        up at the provider first: a charge it made stays charged, one it never made is
        voided with the rest. Until the provider answers, this retries."""
        async with self.pool.connection() as conn:
            cur = await conn.execute(_Q["pending_of_month"], self._of_job(step))
            pending = [
                Charge(i, number, cents, "", "") for i, number, cents in await cur.fetchall()
            ]
        if pending:
            limit = asyncio.Semaphore(params.concurrency)

            async def look_up(charge: Charge) -> Outcome | None:
                async with limit:
                    return await provider.lookup(charge)

            # Any lookup the provider cannot answer fails the call before anything is
            # voided: the compensation is retried until it answers them all.
            async with self._provider() as provider:
                found = await asyncio.gather(*(look_up(c) for c in pending))
            async with step.transaction() as conn:
                made = [outcome for outcome in found if outcome is not None]
                await conn.execute(_Q["record_charges"], _answers(made))
                never = [c.invoice_id for c, o in zip(pending, found, strict=True) if o is None]
                await conn.execute(_Q["forget_pending"], {"invoice_ids": never})
        async with step.transaction() as conn:
            cur = await conn.execute(_Q["void_uncharged"], self._of_job(step))
            voided, charged = await cur.fetchone()
            return await step.finish(
                conn,
                {"voided": voided, "charged": len(charged), "looked_up": len(pending)},
                details={"charged_invoices": list(charged)},
            )

    async def charge_invoices(self, step: StepRun, params: BillingParams) -> StepResult:
        """Step 3: charge each invoice of the month once, through the provider.

        Per batch: the charges are marked pending (fenced), the requests sent with no
        transaction open, and the answers recorded (fenced). A batch under way finishes
        even if the run is cancelled, so its answers are never lost to a compensation."""
        deadline = time.monotonic() + params.call_seconds
        async with self._provider() as provider, step.keep_alive():
            while True:
                async with self.pool.connection() as conn:
                    cur = await conn.execute(
                        _Q["to_charge"], self._of_job(step, limit=params.charge_batch)
                    )
                    batch = [Charge(*row) for row in await cur.fetchall()]
                    cur = await conn.execute(_Q["charge_progress"], self._of_job(step))
                    total, done = await cur.fetchone()
                if not batch:
                    async with step.transaction() as conn:
                        cur = await conn.execute(_Q["month_totals"], self._of_job(step))
                        charged, declined, cents = await cur.fetchone()
                        counts = {"charged": charged, "declined": declined, "cents": cents}
                        return await step.finish(conn, counts, items=total)
                answered = await uninterrupted(self._charge_batch(step, provider, batch, params))
                done += answered
                if time.monotonic() > deadline:
                    return step.more(items_done=done, items_total=total)

    async def _charge_batch(
        self, step: StepRun, provider: PaymentProvider, batch: list[Charge], params: BillingParams
    ) -> int:
        """Send one batch and record what came back; raise if any charge got no answer."""
        month = self._month(step)
        async with step.transaction() as conn:
            cur = await conn.execute(
                _Q["mark_pending"],
                {
                    "month": month,
                    "invoice_ids": [c.invoice_id for c in batch],
                    "amounts": [c.amount_cents for c in batch],
                },
            )
            first_sends = {invoice_id for (invoice_id,) in await cur.fetchall()}
        limit = asyncio.Semaphore(params.concurrency)

        async def charge(one: Charge) -> Outcome:
            async with limit:
                return await provider.charge(one)

        # No transaction is open while the requests are on the wire.
        answers = await asyncio.gather(*(charge(c) for c in batch), return_exceptions=True)
        outcomes = [a for a in answers if isinstance(a, Outcome)]
        # A refused re-send says nothing about the earlier send: only a charge's first
        # request, refused before it was processed, shows it was never made.
        refused = [
            c.invoice_id
            for c, a in zip(batch, answers, strict=True)
            if isinstance(a, ProviderUnavailable)
            and not a.charged_maybe
            and c.invoice_id in first_sends
        ]
        async with step.transaction() as conn:
            await conn.execute(_Q["record_charges"], _answers(outcomes))
            await conn.execute(_Q["forget_pending"], {"invoice_ids": refused})
            await step.save(conn, {"answered": len(outcomes)})
        failures = [a for a in answers if isinstance(a, BaseException)]
        if failures:
            refusal = next((f for f in failures if isinstance(f, ProviderRefused)), None)
            if refusal is not None:
                raise ApplicationError(str(refusal), non_retryable=True) from None
            raise failures[0]  # transient: Temporal retries the step, which sends the rest
        return len(outcomes)

    def _provider(self) -> PaymentProvider:
        return PaymentProvider(self.provider_url, self.provider_key, self.provider_timeout)

    async def queue_receipts(self, step: StepRun, params: BillingParams) -> StepResult:
        """Step 4: a receipt per charged invoice in the outbox; close the billing run."""
        async with step.transaction() as conn:
            cur = await conn.execute(_Q["queue_receipts"], self._of_job(step))
            (queued,) = await cur.fetchone()
            await conn.execute(
                _Q["close_run"], self._of_job(step, execution_id=step.execution.execution_id)
            )
            return await step.finish(conn, {"receipts": queued})


def _answers(outcomes: list[Outcome]) -> dict[str, Any]:
    return {
        "invoice_ids": [o.invoice_id for o in outcomes],
        "statuses": [o.status for o in outcomes],
        "charge_ids": [o.charge_id for o in outcomes],
        "decline_codes": [o.decline_code for o in outcomes],
    }
