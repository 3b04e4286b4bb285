"""Nightly reconciliation: the previous local day's ledger against its settled card payments.

`activities.py` does the work, `queries.sql` holds its SQL.
"""

from activities.run.kinds import JobKind
from jobs.nightly_reconcile.activities import ReconcileActivities

KINDS = (
    JobKind(
        "nightly-reconcile",
        ReconcileActivities,
        activity="reconcile_ledger",
        slot_work="reconcile_in",
    ),
)
