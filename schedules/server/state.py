"""What the operator commands read from and send to Temporal and PostgreSQL.

Temporal: a job's schedule state, triggers that are verified to have started a run,
backfills, pause and resume. PostgreSQL: the last execution of each job and a job's recent
executions (`schedules/sql/operate.sql`). Every call goes through `Context.retrying`, so a
starting cluster is waited for and an unreachable one is one clear error.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from google.protobuf.timestamp_pb2 import Timestamp
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row
from temporalio.api.enums.v1 import ScheduleOverlapPolicy as ProtoOverlap
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.schedule.v1 import SchedulePatch, TriggerImmediatelyRequest
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import (
    DescribeTaskQueueRequest,
    ListScheduleMatchingTimesRequest,
    PatchScheduleRequest,
)
from temporalio.client import (
    ScheduleActionResult,
    ScheduleBackfill,
    ScheduleDescription,
    ScheduleOverlapPolicy,
)
from temporalio.service import RPCError

from core import redact
from core.errors import SchedulerError
from core.sql import queries as named_queries
from schedules.catalog.compile import MANAGED_MEMO_KEY, MANAGED_MEMO_VALUE
from schedules.record import database_hint
from schedules.server.connection import Connection as Context
from schedules.server.found import catalog_entry, schedule_or_none, workflow_or_none
from workflows import JobRun

_TICK = timedelta(microseconds=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Describe calls in flight at once for `list`.
_CONCURRENCY = 16
_POLL = 0.1  # seconds between describe calls while waiting for the server


class OperationError(SchedulerError):
    """A command could not be carried out (the message says which job and why)."""

    exit_code = 1


class DatabaseUnavailableError(OperationError):
    """PostgreSQL could not be read; the message never holds the connection URL."""


def queries() -> dict[str, str]:
    """The named queries of `schedules/sql/operate.sql`."""
    return named_queries("schedules.sql", "operate")


# --- schedule state -----------------------------------------------------------------------


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


async def _describe(ctx: Context, job_id: str) -> ScheduleDescription | None:
    client = await ctx.client()

    return await _translated(ctx, job_id, "describe", lambda: schedule_or_none(client, job_id))


async def _translated(ctx: Context, job_id: str, what: str, call):
    """`ctx.retrying(call)`, with a non-transient Temporal error as an `OperationError`."""
    try:
        return await ctx.retrying(call)
    except RPCError as err:
        status = err.status.name if err.status is not None else "error"
        raise OperationError(
            f"{what} of schedule {job_id!r} failed: {status}: {err.message}"
        ) from None


async def schedule_state(ctx: Context, job_id: str) -> ServerState:
    """The schedule of `job_id` as the server has it (`exists=False` when it has none)."""
    described = await _describe(ctx, job_id)
    if described is None:
        return ServerState(exists=False)
    managed = await described.memo_value(MANAGED_MEMO_KEY, default=None) == MANAGED_MEMO_VALUE
    state, info, raw = described.schedule.state, described.info, described.raw_description.info
    definition, since = None, None
    args = getattr(described.schedule.action, "args", None)
    if managed and args:
        client = await ctx.client()
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


async def schedule_states(ctx: Context, job_ids: list[str]) -> dict[str, ServerState]:
    """`schedule_state` of every job, a bounded number at a time.

    Connects first, like the other commands, so an unreachable Temporal fails once; and
    returns (or raises the first error) only when every job's task has finished, so none
    is left to fail unheard as the command exits."""
    await ctx.client()
    limit = asyncio.Semaphore(_CONCURRENCY)

    async def one(job_id: str) -> ServerState:
        async with limit:
            return await schedule_state(ctx, job_id)

    states = await asyncio.gather(*(one(job_id) for job_id in job_ids), return_exceptions=True)
    failed = next((s for s in states if isinstance(s, BaseException)), None)
    if failed is not None:
        raise failed
    return dict(zip(job_ids, states, strict=True))


async def usable_state(ctx: Context, job_id: str) -> ServerState:
    """The state of a schedule this project manages, or an `OperationError` saying why not."""
    state = await schedule_state(ctx, job_id)
    if not state.exists:
        raise OperationError(
            f"job {job_id!r} has no schedule on Temporal yet: run `python -m schedules sync`"
        )
    if not state.managed:
        raise OperationError(
            f"schedule {job_id!r} exists but is not managed by this project; not touching it"
        )
    return state


async def _until(
    ctx: Context, job_id: str, what: str, send, done, timeout: float, resend: float = 2.0
) -> ServerState:
    """Send an idempotent schedule patch until `done(state)` holds, for up to `timeout` s.

    Measured on the dev server (1.32): of schedule patches that arrive close together,
    some are lost without an error. A pause or resume is safe to send again.
    """
    deadline = time.monotonic() + timeout
    while True:
        await _translated(ctx, job_id, what, send)
        next_send = time.monotonic() + resend
        while time.monotonic() < next_send:
            state = await schedule_state(ctx, job_id)
            if done(state):
                return state
            if time.monotonic() > deadline:
                raise OperationError(
                    f"{what} of schedule {job_id!r} did not take effect within {timeout:g}s"
                )
            await asyncio.sleep(_POLL)


async def pause(ctx: Context, job_id: str, note: str, timeout: float = 10.0) -> None:
    """Pause the schedule, with `note` saying why; return once the server shows it."""
    client = await ctx.client()
    await _until(
        ctx,
        job_id,
        "pause",
        lambda: client.get_schedule_handle(job_id).pause(note=note),
        lambda state: state.paused and state.note == note,
        timeout,
    )


async def resume(ctx: Context, job_id: str, note: str, timeout: float = 10.0) -> None:
    """Unpause the schedule (`note` becomes its note); return once the server shows it."""
    client = await ctx.client()
    await _until(
        ctx,
        job_id,
        "resume",
        lambda: client.get_schedule_handle(job_id).unpause(note=note),
        lambda state: not state.paused,
        timeout,
    )


# --- triggers and backfills ---------------------------------------------------------------


def _timestamp(instant: datetime) -> Timestamp:
    seconds = (instant - _EPOCH) // timedelta(seconds=1)
    return Timestamp(seconds=seconds, nanos=instant.microsecond * 1000)


async def _patch_trigger(
    ctx: Context, job_id: str, at: datetime, overlap: ProtoOverlap.ValueType
) -> None:
    """Ask the schedule to start a run now whose nominal time (and identity) is `at`.

    The SDK's `trigger()` lets the server pick the nominal time; setting it here gives the
    run an identity this process knows to the microsecond, so it can tell its own run from
    another trigger's in the same second. One request id for every retry: the server
    applies the patch once.
    """
    client = await ctx.client()
    request = PatchScheduleRequest(
        namespace=client.namespace,
        schedule_id=job_id,
        patch=SchedulePatch(
            trigger_immediately=TriggerImmediatelyRequest(
                overlap_policy=overlap, scheduled_time=_timestamp(at)
            )
        ),
        identity=client.identity,
        request_id=str(uuid.uuid4()),
    )
    await _translated(
        ctx, job_id, "trigger", lambda: client.workflow_service.patch_schedule(request)
    )


async def trigger(ctx: Context, job_id: str, at: datetime, timeout: float) -> ScheduleActionResult:
    """Start one run of `job_id` now (overlap ALLOW_ALL) and return it once it has started.

    Temporal names the run `<job>-<at, to the second>Z`; a run of the same second that is
    still running makes the server drop this start without an error. So the run is looked
    for among the schedule's recent actions by its exact nominal time, and an
    `OperationError` says so when it has not started within `timeout` seconds.
    """
    at = at.astimezone(UTC)
    await _patch_trigger(ctx, job_id, at, ProtoOverlap.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL)
    deadline = time.monotonic() + timeout
    while True:
        state = await schedule_state(ctx, job_id)
        for action in state.recent:
            if action.scheduled_at == at:
                return action
        if time.monotonic() > deadline:
            raise OperationError(_not_started(job_id, at, timeout, state))
        await asyncio.sleep(_POLL)


def _not_started(job_id: str, at: datetime, timeout: float, state: ServerState) -> str:
    second = at.replace(microsecond=0)
    same = [a for a in state.recent if a.scheduled_at.replace(microsecond=0) == second]
    when = at.isoformat(timespec="microseconds").replace("+00:00", "Z")
    message = f"the trigger of {job_id!r} at {when} did not start a run within {timeout:g}s"
    if same:
        return (
            f"{message}: Temporal dropped it because run {same[0].action.workflow_id} of "
            "the same second already exists (two triggers in the same second share one "
            "workflow id); trigger again to start another run"
        )
    if state.buffered:
        return (
            f"{message}; {state.buffered} start(s) wait in the schedule's buffer behind a "
            f"running one, so it may still start: `python -m schedules describe {job_id}`"
        )
    return (
        f"{message}: Temporal may have dropped it (of schedule updates that arrive together, "
        f"some are lost); see `python -m schedules describe {job_id}` and trigger again"
    )


async def server_times(ctx: Context, job_id: str, start: datetime, end: datetime) -> list[datetime]:
    """The times in `[start, end)` at which the server's schedule of `job_id` fires."""
    client = await ctx.client()
    # The server reads (start, end]; fire times are whole seconds, so a microsecond earlier
    # on both sides is [start, end).
    request = ListScheduleMatchingTimesRequest(
        namespace=client.namespace,
        schedule_id=job_id,
        start_time=_timestamp(start - _TICK),
        end_time=_timestamp(end - _TICK),
    )
    response = await _translated(
        ctx,
        job_id,
        "listing the fire times",
        lambda: client.workflow_service.list_schedule_matching_times(request),
    )
    return [t.ToDatetime(tzinfo=UTC) for t in response.start_time]


def _taken_up(state: ServerState) -> int:
    """Starts the schedule has accepted so far: started ones plus those in its buffer."""
    return state.num_actions + state.buffered


async def _wait_taken_up(ctx: Context, job_id: str, before: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _taken_up(await schedule_state(ctx, job_id)) <= before:
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(_POLL)
    return True


async def backfill(
    ctx: Context, job_id: str, start: datetime, end: datetime, timeout: float = 10.0
) -> None:
    """Temporal's backfill of `[start, end)`, overlap BUFFER_ALL: every run, one at a time.

    Returns once the schedule has taken up its first run (started or buffered); an
    `OperationError` says so if it has not within `timeout` seconds.
    """
    client = await ctx.client()
    request = ScheduleBackfill(
        start_at=start - _TICK,  # inclusive or not, no whole-second fire time is lost
        end_at=end - _TICK,
        overlap=ScheduleOverlapPolicy.BUFFER_ALL,
    )
    before = _taken_up(await schedule_state(ctx, job_id))
    await _translated(
        ctx, job_id, "backfill", lambda: client.get_schedule_handle(job_id).backfill(request)
    )
    if not await _wait_taken_up(ctx, job_id, before, timeout):
        raise OperationError(
            f"the backfill of {job_id!r} was not taken up within {timeout:g}s: Temporal may "
            "have dropped it (a schedule update arriving together with another can be lost); "
            "run it again: slots that already completed are no-ops"
        )


async def trigger_each(
    ctx: Context, job_id: str, times: list[datetime], timeout: float = 10.0, tries: int = 3
) -> None:
    """Start a run for each of `times`, overlap BUFFER_ALL (one after another).

    For fire times the server's schedule would not produce (outside the years a
    DST-compiled spec covers, an unsynced catalog change): each run gets the nominal time
    the job's own rules give it. Triggers sent back to back get lost (measured on the dev
    server 1.32), so each is sent once the previous one was taken up, and sent again if it
    was not within `timeout` seconds (a duplicate of a slot is a no-op).
    """
    for done, at in enumerate(times):
        before = _taken_up(await schedule_state(ctx, job_id))
        for _ in range(tries):
            await _patch_trigger(ctx, job_id, at, ProtoOverlap.SCHEDULE_OVERLAP_POLICY_BUFFER_ALL)
            if await _wait_taken_up(ctx, job_id, before, timeout):
                break
        else:
            raise OperationError(
                f"backfill of {job_id!r}: the run for {_utc_text(at)} was not taken up after "
                f"{tries} tries; {done} of {len(times)} runs were requested: run the "
                f"backfill again with --start {_utc_text(at)}"
            )


def _utc_text(instant: datetime) -> str:
    return instant.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


# --- PostgreSQL ---------------------------------------------------------------------------


def _redacted(exc: Exception, url: str) -> str:
    """The first line of a psycopg error, with the URL's password (if any) masked."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    try:
        password = conninfo_to_dict(url).get("password")
    except psycopg.Error:
        password = None
    return redact.scrub(text.replace(str(password), "***") if password else text)


async def _fetch(url: str, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    try:
        async with await psycopg.AsyncConnection.connect(
            url, connect_timeout=5, autocommit=True, row_factory=dict_row
        ) as conn:
            cur = await conn.execute(queries()[name], params)
            return await cur.fetchall()
    except psycopg.Error as exc:
        raise DatabaseUnavailableError(
            f"PostgreSQL is unavailable: {_redacted(exc, url)} {database_hint()}"
        ) from None


async def last_runs(url: str, job_ids: list[str]) -> dict[str, dict[str, Any]]:
    """The newest `job_executions` row of each job that has one, by job id."""
    rows = await _fetch(url, "last_runs", {"jobs": job_ids})
    return {row["job_name"]: row for row in rows}


async def recent_executions(url: str, job_id: str, limit: int = 10) -> list[dict[str, Any]]:
    """The newest `limit` `job_executions` rows of `job_id`, newest first."""
    return await _fetch(url, "recent_executions", {"job": job_id, "limit": limit})


async def execution_counts(url: str, job_id: str) -> dict[str, Any]:
    """How many of `job_id`'s executions completed, failed, were skipped ... and the slots
    of its newest success and failure (None if it has none)."""
    (row,) = await _fetch(url, "execution_counts", {"job": job_id})
    return row


async def execution_at(url: str, job_id: str, scheduled_at: datetime) -> dict[str, Any] | None:
    """The `job_executions` row of one slot, if it has one."""
    rows = await _fetch(url, "execution_at", {"job": job_id, "scheduled_at": scheduled_at})
    return rows[0] if rows else None


async def workflow_status(ctx: Context, workflow_id: str) -> str | None:
    """The status of the workflow with this id (its newest run), or None if there is none."""
    client = await ctx.client()

    async def call() -> str | None:
        described = await workflow_or_none(client, workflow_id)
        return described.status.name if described and described.status is not None else None

    return await _translated(ctx, workflow_id, "describe workflow", call)


async def pollers(ctx: Context, task_queue: str) -> int:
    """How many workers poll `task_queue` for workflow tasks."""
    client = await ctx.client()

    async def call() -> int:
        described = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=client.namespace,
                task_queue=TaskQueue(name=task_queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
            )
        )
        return len(described.pollers)

    return await _translated(ctx, task_queue, "describe task queue", call)
