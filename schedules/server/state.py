"""What Temporal says about a job's schedule, its workflows and its task queue (reads).

Every call takes a Temporal `Client` and a `Retry` (default: fail within 5 s), so a
starting cluster is waited for and an unreachable one is one clear error; a refusal is an
`OperationError` naming the schedule.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, ScheduleActionResult, ScheduleDescription
from temporalio.service import RPCError

from core.errors import SchedulerError
from schedules.catalog.compile import MANAGED_MEMO_KEY, MANAGED_MEMO_VALUE
from schedules.server.found import catalog_entry, schedule_or_none, workflow_or_none
from schedules.server.retry import Retry
from workflows import JobRun

T = TypeVar("T")

# Describe calls in flight at once for `list`.
_CONCURRENCY = 16


class OperationError(SchedulerError):
    """A command could not be carried out (the message says which job and why)."""

    exit_code = 1


@dataclass
class ServerState:
    """What Temporal says about one job's schedule."""

    exists: bool
    managed: bool = False
    paused: bool = False
    note: str | None = None
    next_times: list[datetime] = field(default_factory=list)
    recent: list[ScheduleActionResult] = field(default_factory=list)
    running: list[str] = field(default_factory=list)  # workflow ids
    num_actions: int = 0
    skipped_overlap: int = 0
    missed_catchup_window: int = 0
    buffered: int = 0  # starts waiting behind a running one (BUFFER_ONE / BUFFER_ALL)
    buffer_dropped: int = 0
    definition: dict[str, Any] | None = None  # the catalog entry the schedule was built from
    timing_since: datetime | None = None  # since when the schedule's timing is in force

    @property
    def usable(self) -> bool:
        return self.exists and self.managed


async def translated(
    client: Client, retry: Retry | None, job_id: str, what: str, call: Callable[[], Awaitable[T]]
) -> T:
    """`retry(call)`, with a non-transient Temporal error as an `OperationError`."""
    try:
        return await (retry or Retry.for_client(client))(call)
    except RPCError as err:
        status = err.status.name if err.status is not None else "error"
        raise OperationError(
            f"{what} of schedule {job_id!r} failed: {status}: {err.message}"
        ) from None


async def schedule_state(client: Client, job_id: str, *, retry: Retry | None = None) -> ServerState:
    """The schedule of `job_id` as the server has it (`exists=False` when it has none)."""
    described: ScheduleDescription | None = await translated(
        client, retry, job_id, "describe", lambda: schedule_or_none(client, job_id)
    )
    if described is None:
        return ServerState(exists=False)
    managed = await described.memo_value(MANAGED_MEMO_KEY, default=None) == MANAGED_MEMO_VALUE
    state, info, raw = described.schedule.state, described.info, described.raw_description.info
    definition, since = None, None
    args = getattr(described.schedule.action, "args", None)
    if managed and args:
        definition = await catalog_entry(client, described)
        try:
            (run,) = await client.data_converter.decode(args, [JobRun])
            since = run.timing_since
        except Exception:  # an older payload: the state is still worth showing
            since = None
    return ServerState(
        exists=True,
        managed=managed,
        paused=state.paused,
        note=state.note or None,
        next_times=list(info.next_action_times),
        recent=list(info.recent_actions),
        running=[action.workflow_id for action in info.running_actions],
        num_actions=info.num_actions,
        skipped_overlap=info.num_actions_skipped_overlap,
        missed_catchup_window=info.num_actions_missed_catchup_window,
        buffered=raw.buffer_size,
        buffer_dropped=raw.buffer_dropped,
        definition=definition,
        timing_since=since,
    )


async def schedule_states(
    client: Client, job_ids: list[str], *, retry: Retry | None = None
) -> dict[str, ServerState]:
    """`schedule_state` of every job, a bounded number at a time.

    Returns (or raises the first error) only when every job's task has finished, so none
    is left to fail unheard as the caller exits."""
    limit = asyncio.Semaphore(_CONCURRENCY)

    async def one(job_id: str) -> ServerState:
        async with limit:
            return await schedule_state(client, job_id, retry=retry)

    states = await asyncio.gather(*(one(job_id) for job_id in job_ids), return_exceptions=True)
    failed = next((s for s in states if isinstance(s, BaseException)), None)
    if failed is not None:
        raise failed
    return dict(zip(job_ids, states, strict=True))


async def usable_state(client: Client, job_id: str, *, retry: Retry | None = None) -> ServerState:
    """The state of a schedule this project manages, or an `OperationError` saying why not."""
    state = await schedule_state(client, job_id, retry=retry)
    if not state.exists:
        raise OperationError(
            f"job {job_id!r} has no schedule on Temporal yet: run `python -m schedules sync`"
        )
    if not state.managed:
        raise OperationError(
            f"schedule {job_id!r} exists but is not managed by this project; not touching it"
        )
    return state


async def workflow_status(
    client: Client, workflow_id: str, *, retry: Retry | None = None
) -> str | None:
    """The status of the workflow with this id (its newest run), or None if there is none."""

    async def call() -> str | None:
        described = await workflow_or_none(client, workflow_id)
        return described.status.name if described and described.status is not None else None

    return await translated(client, retry, workflow_id, "describe workflow", call)


async def pollers(client: Client, task_queue: str, *, retry: Retry | None = None) -> int:
    """How many workers poll `task_queue` for workflow tasks."""

    async def call() -> int:
        described = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=client.namespace,
                task_queue=TaskQueue(name=task_queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
            )
        )
        return len(described.pollers)

    return await translated(client, retry, task_queue, "describe task queue", call)
