"""What the operator asks of a job's schedule: pause, resume, trigger, backfill.

Each call returns once the server shows it took effect (schedule patches that arrive close
together can be lost without an error, measured on the dev server 1.32), or raises an
`OperationError` saying what did not happen and what to do.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime

from temporalio.api.enums.v1 import ScheduleOverlapPolicy as ProtoOverlap
from temporalio.api.schedule.v1 import SchedulePatch, TriggerImmediatelyRequest
from temporalio.api.workflowservice.v1 import PatchScheduleRequest
from temporalio.client import (
    Client,
    ScheduleActionResult,
    ScheduleBackfill,
    ScheduleOverlapPolicy,
)

from core.ids import workflow_id
from schedules.catalog.times import utc_text
from schedules.server.retry import Retry
from schedules.server.state import OperationError, ServerState, schedule_state, translated
from schedules.server.times import server_times, timestamp
from timing import TICK

_POLL = 0.1  # seconds between describe calls while waiting for the server


async def _until(
    client: Client,
    retry: Retry | None,
    job_id: str,
    what: str,
    send,
    done,
    timeout: float,
    resend: float = 2.0,
) -> ServerState:
    """Send an idempotent schedule patch until `done(state)` holds, for up to `timeout` s.

    Measured on the dev server (1.32): of schedule patches that arrive close together,
    some are lost without an error. A pause or resume is safe to send again.
    """
    deadline = time.monotonic() + timeout
    while True:
        await translated(client, retry, job_id, what, send)
        next_send = time.monotonic() + resend
        while time.monotonic() < next_send:
            state = await schedule_state(client, job_id, retry=retry)
            if done(state):
                return state
            if time.monotonic() > deadline:
                raise OperationError(
                    f"{what} of schedule {job_id!r} did not take effect within {timeout:g}s"
                )
            await asyncio.sleep(_POLL)


async def pause(
    client: Client, job_id: str, note: str, timeout: float = 10.0, *, retry: Retry | None = None
) -> None:
    """Pause the schedule, with `note` saying why; return once the server shows it."""
    handle = client.get_schedule_handle(job_id)
    done = lambda state: state.paused and state.note == note  # noqa: E731
    await _until(client, retry, job_id, "pause", lambda: handle.pause(note=note), done, timeout)


async def resume(
    client: Client, job_id: str, note: str, timeout: float = 10.0, *, retry: Retry | None = None
) -> None:
    """Unpause the schedule (`note` becomes its note); return once the server shows it."""
    handle = client.get_schedule_handle(job_id)
    done = lambda state: not state.paused  # noqa: E731
    await _until(client, retry, job_id, "resume", lambda: handle.unpause(note=note), done, timeout)


async def _patch_trigger(
    client: Client, retry: Retry | None, job_id: str, at: datetime, overlap: ProtoOverlap.ValueType
) -> None:
    """Ask the schedule to start a run now whose nominal time (and identity) is `at`.

    The SDK's `trigger()` lets the server pick the nominal time; setting it here gives the
    run an identity this process knows to the microsecond, so it can tell its own run from
    another trigger's in the same second. One request id for every retry: the server
    applies the patch once.
    """
    request = PatchScheduleRequest(
        namespace=client.namespace,
        schedule_id=job_id,
        patch=SchedulePatch(
            trigger_immediately=TriggerImmediatelyRequest(
                overlap_policy=overlap, scheduled_time=timestamp(at)
            )
        ),
        identity=client.identity,
        request_id=str(uuid.uuid4()),
    )
    await translated(
        client, retry, job_id, "trigger", lambda: client.workflow_service.patch_schedule(request)
    )


async def trigger(
    client: Client, job_id: str, at: datetime, timeout: float, *, retry: Retry | None = None
) -> ScheduleActionResult:
    """Start one run of `job_id` now (overlap ALLOW_ALL) and return it once it has started.

    Temporal names the run `<job>-<at, to the second>Z`; a run of the same second that is
    still running makes the server drop this start without an error. So the run is looked
    for among the schedule's recent actions by its exact nominal time, and an
    `OperationError` says so when it has not started within `timeout` seconds.
    """
    at = at.astimezone(UTC)
    await _patch_trigger(client, retry, job_id, at, ProtoOverlap.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL)
    deadline = time.monotonic() + timeout
    while True:
        state = await schedule_state(client, job_id, retry=retry)
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


def _taken_up(state: ServerState) -> int:
    """Starts the schedule has accepted so far: started ones plus those in its buffer."""
    return state.num_actions + state.buffered


async def _wait_taken_up(
    client: Client, retry: Retry | None, job_id: str, before: int, timeout: float
) -> bool:
    deadline = time.monotonic() + timeout
    while _taken_up(await schedule_state(client, job_id, retry=retry)) <= before:
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(_POLL)
    return True


async def backfill(
    client: Client,
    job_id: str,
    start: datetime,
    end: datetime,
    timeout: float = 10.0,
    *,
    first: datetime | None = None,
    retry: Retry | None = None,
) -> None:
    """Temporal's backfill of `[start, end)`, overlap BUFFER_ALL: every run, one at a time.

    Returns once the run of its first fire time has started (`first`; without it, the
    first the schedule lists in the range), as `trigger` looks for its own run: a run of
    that slot among the schedule's recent actions that was not there before. Not a count
    of the schedule's starts, which a trigger, another backfill or a fire time of the
    schedule moves as well. An `OperationError` says so if it has not started within
    `timeout` seconds (a run in flight can hold it in the schedule's buffer: it may still
    start) or the schedule has no fire time in the range.
    """
    if first is None:
        listed = await translated(
            client,
            retry,
            job_id,
            "listing the fire times",
            lambda: server_times(client, job_id, start, end),
        )
        if not listed:
            raise OperationError(
                f"schedule {job_id!r} has no fire time in [{utc_text(start)}, {utc_text(end)}): "
                "nothing to backfill"
            )
        first = listed[0]
    request = ScheduleBackfill(
        start_at=start - TICK,  # inclusive or not, no whole-second fire time is lost
        end_at=end - TICK,
        overlap=ScheduleOverlapPolicy.BUFFER_ALL,
    )
    earlier = _runs_of(await schedule_state(client, job_id, retry=retry), first)
    await translated(
        client,
        retry,
        job_id,
        "backfill",
        lambda: client.get_schedule_handle(job_id).backfill(request),
    )
    deadline = time.monotonic() + timeout
    while True:
        state = await schedule_state(client, job_id, retry=retry)
        if _runs_of(state, first) - earlier:
            return
        if time.monotonic() > deadline:
            raise OperationError(_backfill_not_started(job_id, first, timeout, state))
        await asyncio.sleep(_POLL)


def _runs_of(state: ServerState, slot: datetime) -> set[str]:
    """The runs of `slot` among the schedule's recent actions."""
    return {a.action.first_execution_run_id for a in state.recent if a.scheduled_at == slot}


def _backfill_not_started(job_id: str, first: datetime, timeout: float, state: ServerState) -> str:
    message = (
        f"the backfill of {job_id!r} did not start its first run ({workflow_id(job_id, first)}) "
        f"within {timeout:g}s"
    )
    if state.buffered:
        return (
            f"{message}; {state.buffered} start(s) wait in the schedule's buffer behind a "
            f"running one, so it may still start: `python -m schedules describe {job_id}`"
        )
    return (
        f"{message}: Temporal may have dropped it (a schedule update arriving together with "
        "another can be lost, a start whose workflow id is taken is dropped); run it again: "
        "slots that already completed are no-ops"
    )


async def trigger_each(
    client: Client,
    job_id: str,
    times: list[datetime],
    timeout: float = 10.0,
    tries: int = 3,
    *,
    retry: Retry | None = None,
) -> None:
    """Start a run for each of `times`, overlap BUFFER_ALL (one after another).

    For fire times the server's schedule would not produce (outside the years a
    DST-compiled spec covers, an unsynced catalog change): each run gets the nominal time
    the job's own rules give it. Triggers sent back to back get lost (measured on the dev
    server 1.32), so each is sent once the previous one was taken up, and sent again if it
    was not within `timeout` seconds (a duplicate of a slot is a no-op).
    """
    for done, at in enumerate(times):
        before = _taken_up(await schedule_state(client, job_id, retry=retry))
        for _ in range(tries):
            await _patch_trigger(
                client, retry, job_id, at, ProtoOverlap.SCHEDULE_OVERLAP_POLICY_BUFFER_ALL
            )
            if await _wait_taken_up(client, retry, job_id, before, timeout):
                break
        else:
            raise OperationError(
                f"backfill of {job_id!r}: the run for {utc_text(at)} was not taken up after "
                f"{tries} tries; {done} of {len(times)} runs were requested: run the "
                f"backfill again with --start {utc_text(at)}"
            )
