"""Card settlement: captured card payments settled up to each minute's slot, one batch a run.

`activities.py` does the work, `queries.sql` holds its SQL, `demo.sql` the data `make run` loads.
"""

from activities.kinds import JobKind
from jobs.card_settlement.activities import SettlementActivities, SettlementParams

KINDS = (
    JobKind(
        name="card-settlement",
        activity="settle_card_payments",
        params=SettlementParams,
        description="settle captured card payments up to the slot's time, one batch a run",
        owner=SettlementActivities,
    ),
)
