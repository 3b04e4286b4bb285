"""Weekly cleanup: delivered outbox messages and old execution records deleted in short batches.

`activities.py` does the work, `queries.sql` holds its SQL.
"""

from activities.run.kinds import JobKind
from jobs.weekly_cleanup.activities import CleanupActivities

KINDS = (JobKind("weekly-cleanup", CleanupActivities, activity="delete_expired_records"),)
