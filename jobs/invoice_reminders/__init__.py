"""Invoice reminders: overdue unpaid invoices get one reminder each, through the outbox.

`activities.py` does the work, `queries.sql` holds its SQL, `demo.sql` the data `make run` loads.
"""

from activities.run.kinds import JobKind
from jobs.invoice_reminders.activities import InvoiceActivities

KINDS = (JobKind("invoice-reminders", InvoiceActivities, activity="send_invoice_reminders"),)
