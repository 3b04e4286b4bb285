"""The hook between the API and the dispatcher: start one recorded slot now.

`trigger` records a manual intent (`runtime_dispatch_intents`, started_at NULL) and, when
given a Temporal client, hands it to `start_slot`, which starts its workflow at once; the
dispatcher's next tick starts every intent not yet marked started (and marks those it
finds started).
"""

from __future__ import annotations

from temporalio.client import Client

from activities.runtime.start import Intent, attributes_registered, start_intent


async def start_slot(client: Client, intent: Intent, *, task_queue: str | None = None) -> bool:
    """Start the run of `intent` now, on the fleet's `task_queue`, with its schedule's labels
    (tenant, name, kind, time zone: the intent's) as the run's search attributes and summary;
    whether it was started here. False without a task queue, or when a run of its workflow
    id is open or completed: the dispatcher's next tick starts (or marks) every intent not
    yet marked started (`activities.runtime.dispatch`), so a start is never lost, and never
    doubled."""
    if task_queue is None:
        return False
    attributes = await attributes_registered(client)
    return await start_intent(client, task_queue, intent.workflow_id, intent, attributes)
