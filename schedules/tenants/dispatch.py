"""The hook between the API and the dispatcher: start one recorded slot now.

`trigger` records a manual intent (`runtime_dispatch_intents`, started_at NULL) and, when
given a Temporal client, hands it to `start_slot`, which starts its workflow at once; the
dispatcher's next tick starts every intent not yet marked started (and marks those it
finds started).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from temporalio.client import Client

from activities.runtime.start import Intent as DispatchIntent
from activities.runtime.start import attributes_registered, start_intent


@dataclass(frozen=True)
class Intent:
    """A slot decided for a start (a `runtime_dispatch_intents` row)."""

    schedule_id: int
    scheduled_at: datetime
    workflow_id: str
    origin: str
    decided_at: datetime
    started_at: datetime | None = None


async def start_slot(
    client: Client,
    intent: Intent,
    *,
    task_queue: str | None = None,
    labels: tuple[str, str, str, str] | None = None,
) -> bool:
    """Start the run of `intent` now, on the fleet's `task_queue`, with its schedule's
    `labels` (tenant, name, kind, time zone) as the run's search attributes and summary; whether it was started
    here. False without them, or when a run of its workflow id is open or completed: the
    dispatcher's next tick starts (or marks) every intent not yet marked started
    (`activities.runtime.dispatch`), so a start is never lost, and never doubled."""
    if task_queue is None or labels is None:
        return False
    tenant, name, kind, timezone = labels
    found = DispatchIntent(
        intent.schedule_id, intent.scheduled_at, intent.origin, intent.workflow_id,
        tenant, name, kind, timezone,
    )  # fmt: skip
    attributes = await attributes_registered(client)
    return await start_intent(client, task_queue, intent.workflow_id, found, attributes)
