"""Card settlement: captured card payments settled up to each minute's slot, one batch a run.

`activities.py` does the work, `queries.sql` holds its SQL, `demo.sql` the data `make run` loads.
"""

from activities.run.kinds import JobKind
from jobs.card_settlement.activities import SettlementActivities

KINDS = (JobKind("card-settlement", SettlementActivities, activity="settle_card_payments"),)
