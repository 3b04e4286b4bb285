"""Monthly billing as a workflow of four steps, with compensation (see `activities.py`)."""

from __future__ import annotations

from temporalio import workflow

from workflows.models import WorkflowJobInput
from workflows.steps import JobSteps

with workflow.unsafe.imports_passed_through():
    from activities.common.models import WorkResult
    from jobs.monthly_billing.activities import BillingActivities


@workflow.defn
class MonthlyBillingWorkflow:
    """Bill the previous month: open it, invoice, charge, send receipts.

    If charging fails for good or the run is cancelled, the uncharged invoices are voided
    and the month is reopened (in that order); charged invoices stay charged.
    """

    @workflow.run
    async def run(self, job: WorkflowJobInput) -> WorkResult:
        async with JobSteps(job, total=4) as steps:
            opened = await steps.run(
                BillingActivities.open_billing_run, compensate=BillingActivities.reopen_billing_run
            )
            await steps.run(
                BillingActivities.generate_invoices,
                compensate=BillingActivities.void_uncharged_invoices,
                inputs=opened.output,
            )
            await steps.run(BillingActivities.charge_invoices, inputs=opened.output)
            await steps.run(BillingActivities.queue_receipts, inputs=opened.output)
        return steps.result
