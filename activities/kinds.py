"""What a job can run: each kind names its work activity and its typed params model.

The catalog validates a job's `params` against its kind's model before anything reaches
Temporal, and the worker registers every kind's activity.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from activities.invoices import InvoiceReminderParams


@dataclass(frozen=True)
class JobKind:
    name: str
    activity: str
    params: type[BaseModel]
    description: str


KINDS: dict[str, JobKind] = {
    kind.name: kind
    for kind in (
        JobKind(
            name="invoice-reminders",
            activity="send_invoice_reminders",
            params=InvoiceReminderParams,
            description="remind overdue unpaid invoices, one outbox message each",
        ),
    )
}
