"""Hourly sync: each slot's own window of events aggregated per account, once per window.

`activities.py` does the work, `queries.sql` holds its SQL, `demo.sql` the data `make run` loads.
"""

from activities.run.kinds import JobKind
from jobs.hourly_sync.activities import HourlySyncActivities

KINDS = (JobKind("hourly-sync", HourlySyncActivities, activity="sync_hourly_totals"),)
