"""What a run notes for the Temporal UI that only the server can tell it.

Two local activities of `ScheduledJobWorkflow`, each run only on the path that needs it
(`workflows.run_notes`):

- `backfill_skips`: a run the server started late (a backfill, or catch-up after downtime)
  asks what the server skipped of the backfill over its slot (`activities.catchup.backfills`), so
  its details say how many slots the Web UI dialog's default overlap policy dropped, and
  which.
- `outcome_attribute`: a run that did no work (its slot was completed, skipped or taken over
  before) marks itself with the `ScheduledJobsOutcome` search attribute, so the UI's
  workflow lists tell it from a run that did work: a column, or the filter
  `ScheduledJobsOutcome = "already_completed"`. The workflow upserts it only once this
  says the namespace has it (`schedules sync` registers it): an attribute the namespace
  does not know fails the workflow task, and the run would retry that task for ever.
"""

from __future__ import annotations

import time

from temporalio import activity
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.common import SearchAttributeKey

from activities.catchup.backfills import BackfillSkips, SkipsInput, backfill_skips

OUTCOME_ATTRIBUTE = SearchAttributeKey.for_keyword("ScheduledJobsOutcome")
# How long a worker trusts an answer that the attribute is missing before asking again.
_MISSING_FOR = 60.0


class RunNotesActivities:
    """`backfill_skips` and `outcome_attribute`; one per worker, with the worker's client."""

    def __init__(self) -> None:
        self._registered = False  # once it is, it stays: asked no more
        self._missing_since: float | None = None

    @activity.defn(name="backfill_skips")
    async def backfill_skips(self, ask: SkipsInput) -> BackfillSkips | None:
        return await backfill_skips(activity.client(), ask)

    @activity.defn(name="outcome_attribute")
    async def outcome_attribute(self) -> bool:
        """Whether the namespace has `ScheduledJobsOutcome` as a Keyword attribute."""
        if self._registered:
            return True
        now = time.monotonic()
        if self._missing_since is not None and now - self._missing_since < _MISSING_FOR:
            return False
        client = activity.client()
        listed = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=client.namespace)
        )
        found = listed.custom_attributes.get(OUTCOME_ATTRIBUTE.name)
        self._registered = found == OUTCOME_ATTRIBUTE.indexed_value_type
        self._missing_since = None if self._registered else now
        return self._registered
