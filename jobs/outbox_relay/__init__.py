"""The outbox relay: due outbox messages delivered by email or webhook, at least once.

`activities.py` does the work, `queries.sql` holds its SQL.
"""

from activities.kinds import JobKind
from jobs.outbox_relay.activities import RelayActivities, RelayParams

KINDS = (
    JobKind(
        name="outbox-relay",
        activity="relay_outbox",
        params=RelayParams,
        description="deliver due outbox messages by email or webhook, at least once",
        owner=RelayActivities,
        settings=True,
    ),
)
