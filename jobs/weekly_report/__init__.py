"""`weekly-report`: the reference runtime kind (issue 21). One runtime schedule per
customer, in the customer's zone (e.g. Mondays 08:00 local); each slot sums that
customer's local week in PostgreSQL and emails it through the outbox, once per slot.

`activities.py` does the work, `queries.sql` holds its SQL, the tables are migration 0020;
`demo.sql` holds `make run`'s customers.
"""

from activities.run.kinds import JobKind, RuntimeKind
from activities.runtime.ownership import TenantRow
from jobs.weekly_report.activities import WeeklyReportActivities

KINDS = (
    JobKind(
        "weekly-report",
        WeeklyReportActivities,
        activity="send_weekly_report",
        slot_work="report_in",
        description="email a customer the summary of their local week",
    ),
)
# One slot per run: a report is a customer's. Its `customer_id` names a customer of the
# schedule's tenant (`customers.tenant`): another tenant's, or none, is refused.
RUNTIME_KINDS = (
    RuntimeKind.of(KINDS[0], owns=(TenantRow("customer_id", "customers", what="customer"),)),
)
