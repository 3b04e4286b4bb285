"""Monthly billing: each month's subscriptions invoiced, charged and receipted, in steps.

A workflow job: `workflow.py` runs the steps of `activities.py` in order, with
compensation; `provider.py` is the payment provider's API; `queries.sql` holds the SQL,
`demo.sql` the subscriptions `make run` loads.
"""

from activities.run.kinds import JobKind
from jobs.monthly_billing.activities import BillingActivities
from jobs.monthly_billing.workflow import MonthlyBillingWorkflow

KINDS = (
    JobKind(
        "monthly-billing",
        BillingActivities,
        settings=True,
        workflow=MonthlyBillingWorkflow,
        steps=(
            "open_billing_run",
            "generate_invoices",
            "charge_invoices",
            "queue_receipts",
            "reopen_billing_run",
            "void_uncharged_invoices",
        ),
    ),
)
