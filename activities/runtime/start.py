"""Starting the run of a slot decided for a start (an intent), by the dispatcher's tick
(`activities.runtime.dispatch`) or a trigger given a client (`schedules.tenants.dispatch`).

The workflow id is the slot's (`rt-<id>-<slot>Z`) or its batch's (`rt-batch-...`), so a
start repeated by two dispatchers, a retried tick or a trigger beside a tick is refused by
Temporal and only reported; the runs carry the schedule's tenant, name and kind as search
attributes (keywords `schedules sync` registers) when the namespace has them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.common import (
    Priority,
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError

from activities.common.lifetime import RUNTIME_RUN_LIFETIME, batch_lifetime
from activities.common.models import Origin
from activities.runtime.batch import SLOTS_PER_ACTIVITY
from activities.runtime.models import (
    BATCH_PREFIX,
    BATCH_SLOTS,
    KIND_ATTRIBUTE,
    RUNTIME_ATTRIBUTES,
    SCHEDULE_ATTRIBUTE,
    TENANT_ATTRIBUTE,
    BatchRun,
    RuntimeRun,
)
from timing.zones import zone

RUN_WORKFLOW = "RuntimeRunWorkflow"
BATCH_WORKFLOW = "RuntimeBatchWorkflow"
BATCH_LIFETIME = batch_lifetime(BATCH_SLOTS, SLOTS_PER_ACTIVITY)


@dataclass(frozen=True)
class Intent:
    """A slot decided for a start (a `runtime_dispatch_intents` row, read by column name:
    the dispatcher's `unstarted`, a trigger's or backfill's `add_intent`) and the labels of
    its schedule, the run's search attributes and summary."""

    schedule_id: int
    scheduled_at: datetime
    origin: Origin
    workflow_id: str
    tenant: str
    name: str
    kind: str
    timezone: str = "UTC"  # the schedule's zone: the slot's local time in the run's summary
    decided_at: datetime | None = None
    started_at: datetime | None = None  # None: no start reported yet


async def start_intent(
    client: Client, task_queue: str, workflow_id: str, intent: Intent, attributes: bool
) -> bool:
    """Start the workflow of an intent (of a batch, when `workflow_id` is a batch's), with
    the run's search attributes when the namespace has them. False when Temporal refuses
    the start because a run of that id is open or completed: started before. A closed run
    that failed or was terminated is started again (its slot's ledger row decides)."""
    batch = workflow_id.startswith(BATCH_PREFIX)
    pairs = [SearchAttributePair(KIND_ATTRIBUTE, intent.kind)]
    if not batch:
        pairs += [
            SearchAttributePair(TENANT_ATTRIBUTE, intent.tenant),
            SearchAttributePair(SCHEDULE_ATTRIBUTE, intent.name),
        ]
    arg: Any = (
        BatchRun(batch_id=workflow_id)
        if batch
        else RuntimeRun(
            schedule_id=intent.schedule_id, scheduled_at=intent.scheduled_at, origin=intent.origin
        )
    )
    try:
        await client.start_workflow(
            BATCH_WORKFLOW if batch else RUN_WORKFLOW,
            arg,
            id=workflow_id,
            task_queue=task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
            # Every run is bounded (`activities.common.lifetime`).
            execution_timeout=BATCH_LIFETIME if batch else RUNTIME_RUN_LIFETIME,
            search_attributes=TypedSearchAttributes(pairs) if attributes else None,
            priority=Priority.default if batch else Priority(fairness_key=fairness_key(intent)),
            static_summary=None if batch else run_summary(intent),
            static_details=None if batch else run_details(intent),
        )
    except WorkflowAlreadyStartedError:
        return False
    return True


def run_summary(intent: Intent) -> str:
    """The run's one line in the Temporal UI: `acme/nightly: 2026-03-08 03:00 EDT (backfill)`,
    as a catalog run's summary names its job (issue 39, item 5). Cut to the UI's 400 bytes."""
    line = f"{intent.tenant}/{intent.name}: {_local(intent)} ({intent.origin})"
    return line if len(line.encode()) <= 400 else line.encode()[:397].decode(errors="ignore") + "…"


def run_details(intent: Intent) -> str:
    """The run's details in the Temporal UI (Markdown): tenant, schedule, kind, the slot
    in the schedule's zone and in UTC, its origin. The counts are the run's result."""
    slot_utc = intent.scheduled_at.astimezone(UTC).isoformat(timespec="seconds")
    return "\n".join(
        [
            f"- tenant: {intent.tenant}",
            f"- schedule: {intent.name} (runtime schedule {intent.schedule_id}, kind {intent.kind})",
            f"- slot: {_local(intent)} in {intent.timezone} ({slot_utc.replace('+00:00', 'Z')})",
            f"- origin: {intent.origin}",
        ]
    )[:20_000]


def _local(intent: Intent) -> str:
    local = intent.scheduled_at.astimezone(zone(intent.timezone))
    return f"{local:%Y-%m-%d %H:%M:%S} {local.tzname()}"


def fairness_key(intent: Intent) -> str:
    """The run's task-queue fairness key (issue 40): its tenant, cut to the server's 64
    bytes (a tenant is up to 200 characters; two that share their first 64 bytes share a
    key, which only makes the server's balancing coarser)."""
    return intent.tenant.encode()[:64].decode(errors="ignore")


async def attributes_registered(client: Client) -> bool:
    """Whether the client's namespace has the runtime search attributes."""
    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=client.namespace)
    )
    return all(key.name in listed.custom_attributes for key in RUNTIME_ATTRIBUTES)
