"""Invoice reminders: overdue unpaid invoices get one reminder each, through the outbox.

`activities.py` does the work, `queries.sql` holds its SQL, `demo.sql` the data `make run` loads.
"""

from activities.kinds import JobKind
from jobs.invoice_reminders.activities import InvoiceActivities, InvoiceReminderParams

KINDS = (
    JobKind(
        name="invoice-reminders",
        activity="send_invoice_reminders",
        params=InvoiceReminderParams,
        description="remind overdue unpaid invoices, one outbox message each",
        owner=InvoiceActivities,
    ),
)
