"""Open runs of retired code: what `python -m schedules compat` looks for.

A release removes the branch that finished the runs of an older release (a patch's old
path, a payload reader, a workflow type: docs/architecture.md, Compatibility shims and
patches) only once no such run is open. `RETIRED` names each removal, the workflow types
whose runs it served and when the release that stopped starting such runs came out; the
check asks Temporal's visibility, in the client's namespace, for runs of those types still
running that started before then. None open: the removal is safe. Any open: finish,
cancel or terminate them (their slots then need a backfill) before deploying the release.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from temporalio.client import Client

SHOWN = 20  # open runs named per rule; the count is always whole


@dataclass(frozen=True)
class Retired:
    """Code a release removed: the runs it served are those of `types` started before
    `started_before` (when the release that no longer started them came out)."""

    what: str
    types: tuple[str, ...]
    started_before: datetime

    def query(self, started_before: datetime | None = None) -> str:
        """The visibility query of the runs this removal leaves unfinishable."""
        before = (started_before or self.started_before).astimezone(UTC)
        types = " OR ".join(f'WorkflowType = "{name}"' for name in self.types)
        return (
            f'ExecutionStatus = "Running" AND ({types}) '
            f'AND StartTime < "{before.strftime("%Y-%m-%dT%H:%M:%SZ")}"'
        )


RETIRED: tuple[Retired, ...] = (
    Retired(
        "runs begun by v1/v2 (patch begin-run-local's old branch; their flat timing, "
        "`kind` and `trigger` payloads)",
        ("ScheduledJobWorkflow",),
        datetime(2026, 12, 1, 12, 47, 37, tzinfo=UTC),  # v3
    ),
    Retired(
        "runs of v3 failing at the end of their retries (patch "
        "attempt-series-after-silence's old branch)",
        ("ScheduledJobWorkflow",),
        datetime(2026, 12, 2, 1, 9, 18, tzinfo=UTC),  # v4
    ),
)


@dataclass(frozen=True)
class Found:
    """The open runs one rule found: how many, and the first `SHOWN` workflow ids."""

    retired: Retired
    query: str
    count: int
    workflow_ids: tuple[str, ...]


async def open_retired_runs(
    client: Client,
    rules: tuple[Retired, ...] = RETIRED,
    started_before: datetime | None = None,
) -> list[Found]:
    """Each rule's open runs in the client's namespace (`started_before` replaces each
    rule's time: a fleet that deployed its releases later than they came out)."""
    found = []
    for rule in rules:
        query = rule.query(started_before)
        count = (await client.count_workflows(query)).count
        ids = []
        if count:
            async for run in client.list_workflows(query, limit=SHOWN):
                ids.append(run.id)
        found.append(Found(rule, query, count, tuple(ids)))
    return found
