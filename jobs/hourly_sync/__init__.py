"""Hourly sync: each slot's own window of events aggregated per account, once per window.

`activities.py` does the work, `queries.sql` holds its SQL, `demo.sql` the data `make run` loads.
"""

from activities.kinds import JobKind
from jobs.hourly_sync.activities import HourlySyncActivities, HourlySyncParams

KINDS = (
    JobKind(
        name="hourly-sync",
        activity="sync_hourly_totals",
        params=HourlySyncParams,
        description="aggregate the slot's own hour of events per account, once per window",
        owner=HourlySyncActivities,
    ),
)
