"""The outbox relay: due outbox messages delivered by email or webhook, at least once.

`activities.py` does the work, `queries.sql` holds its SQL.
"""

from activities.run.kinds import JobKind
from jobs.outbox_relay.activities import RelayActivities

KINDS = (JobKind("outbox-relay", RelayActivities, activity="relay_outbox", settings=True),)
