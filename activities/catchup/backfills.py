"""Backfills the server was asked for, and the slots its overlap policy dropped from them.

A backfill from the Temporal UI's dialog defaults to overlap Skip: the server starts the
first requested slot and, because that run is still open when it reaches the next one,
skips every other slot of the range. All the server keeps of that is a counter
(`num_actions_skipped_overlap` in the schedule's info); it does not say which slots. The
requests themselves are in the history of the schedule's own scheduler workflow
(`temporal-sys-scheduler:<schedule id>`, the `patch` signals that carry a
`SchedulePatch.backfill_request`): with them, and the slots the ledger recorded, each
dropped slot can be named.

That history is the server's implementation (the workflow-based scheduler of Temporal
1.20 to 1.3x): where it cannot be read, `backfill_requests` returns nothing and only the
counter speaks (`explain`, `check`'s count).

`check` and `explain` read it from the CLI; a run the server started for such a backfill
reads it too, at its end (`backfill_skips`, a local activity of `activities.catchup.run_notes`), and
says in its Temporal UI details how many slots the server skipped and which. The server
works through a backfill a few slots per pass (10 on 1.32), oldest first: it starts the
first slot of a pass and, under Skip, skips every other slot of the pass because that run
is open. A backfill of up to a pass is therefore settled by the time its first run starts;
of a longer one, the slots after a pass are reached only when the server wakes again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel
from temporalio.api.enums.v1 import ScheduleOverlapPolicy
from temporalio.api.schedule.v1 import SchedulePatch
from temporalio.converter import PayloadConverter
from temporalio.service import RPCError, RPCStatusCode

from core.aio import gather_by
from timing import Timing

logger = logging.getLogger(__name__)

SCHEDULER_WORKFLOW_PREFIX = "temporal-sys-scheduler:"
_TICK = timedelta(microseconds=1)
# How many slots of a backfill a run looks up at most (one describe each, 16 at a time).
MAX_CHECKED = 100
_CONCURRENCY = 16
# Policies under which the server drops a backfilled slot that meets an open run.
_DROPPING = {
    ScheduleOverlapPolicy.SCHEDULE_OVERLAP_POLICY_SKIP: "skip",
    ScheduleOverlapPolicy.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE: "buffer_one",
}
_KEPT = {
    ScheduleOverlapPolicy.SCHEDULE_OVERLAP_POLICY_BUFFER_ALL: "buffer_all",
    ScheduleOverlapPolicy.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL: "allow_all",
    ScheduleOverlapPolicy.SCHEDULE_OVERLAP_POLICY_CANCEL_OTHER: "cancel_other",
    ScheduleOverlapPolicy.SCHEDULE_OVERLAP_POLICY_TERMINATE_OTHER: "terminate_other",
}


@dataclass(frozen=True)
class BackfillRequest:
    """One backfill the server received: `[start, end]`, both ends inclusive as the
    server reads them, and its overlap policy ("" when it took the schedule's)."""

    requested_at: datetime
    start: datetime
    end: datetime
    overlap: str

    def drops(self, schedule_overlap: str) -> bool:
        """Whether the server skips a slot of this backfill that meets an open run."""
        return (self.overlap or schedule_overlap) in _DROPPING.values()


@dataclass(frozen=True)
class DroppedSlot:
    fire: datetime
    request: BackfillRequest


def requests_in(requested_at: datetime, patch: SchedulePatch) -> list[BackfillRequest]:
    """The backfills one `SchedulePatch` carries."""
    found = []
    for request in patch.backfill_request:
        found.append(
            BackfillRequest(
                requested_at=requested_at,
                start=request.start_time.ToDatetime(tzinfo=UTC),
                end=request.end_time.ToDatetime(tzinfo=UTC),
                overlap=overlap_name(request.overlap_policy),
            )
        )
    return found


async def backfill_requests(client: Any, schedule_id: str) -> list[BackfillRequest]:
    """The backfills the schedule's scheduler workflow received in its current run.

    Empty when the server keeps no such workflow or refuses to show its history.
    """
    handle = client.get_workflow_handle(SCHEDULER_WORKFLOW_PREFIX + schedule_id)
    converter = PayloadConverter.default
    found: list[BackfillRequest] = []
    try:
        async for event in handle.fetch_history_events():
            if not event.HasField("workflow_execution_signaled_event_attributes"):
                continue
            signal = event.workflow_execution_signaled_event_attributes
            if signal.signal_name != "patch" or not signal.input.payloads:
                continue
            patch = converter.from_payload(signal.input.payloads[0], SchedulePatch)
            found += requests_in(event.event_time.ToDatetime(tzinfo=UTC), patch)
    except RPCError as exc:
        logger.debug("no scheduler history for %s: %s", schedule_id, exc)
        return []
    return found


async def covering_backfill(
    client: Any,
    schedule_id: str,
    fire: datetime,
    schedule_overlap: str,
    before: datetime | None = None,
) -> BackfillRequest | None:
    """The newest backfill the server received over `fire` (requested at or before
    `before`, when given) that drops overlapping slots."""
    covering = [
        r
        for r in _over(await backfill_requests(client, schedule_id), fire, before)
        if r.drops(schedule_overlap)
    ]
    return covering[-1] if covering else None


def _over(
    requests: Iterable[BackfillRequest], fire: datetime, before: datetime | None
) -> list[BackfillRequest]:
    """The backfills of `requests` over `fire`, requested at or before `before` if given."""
    return [
        r
        for r in requests
        if r.start <= fire <= r.end and (before is None or r.requested_at <= before)
    ]


def overlap_name(policy: int) -> str:
    """The name (`skip`, `buffer_all`, ...) of a schedule's overlap policy ("" if unset)."""
    return _DROPPING.get(policy) or _KEPT.get(policy) or ""


def slot_workflow_id(schedule_id: str, slot: datetime) -> str:
    """The id of the workflow a schedule starts for `slot`: `<schedule id>-<slot>Z`."""
    return f"{schedule_id}-{slot.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"


class SkipsInput(BaseModel):
    """A run asking what the server skipped of the backfill that started it."""

    job_name: str  # the schedule's id
    scheduled_at: datetime  # the run's own slot
    started_at: datetime  # the run's start: a backfill requested after it did not start it
    timing: Timing


class BackfillSkips(BaseModel):
    """The backfill over a run's slot, and the slots of it the server skipped."""

    start: datetime
    end: datetime  # inclusive, as the server reads it
    overlap: str  # the policy that dropped them: the request's, else the schedule's
    skipped: list[datetime]  # oldest first
    counted: int  # the server's count of slots of this schedule skipped by overlap, ever
    checked: int  # slots of the backfill looked up (at most MAX_CHECKED)
    slots: int  # slots of the backfill, up to MAX_CHECKED + 1 (more: not all looked up)


async def backfill_skips(client: Any, ask: SkipsInput) -> BackfillSkips | None:
    """What the server skipped of the backfill that started the run of `ask.scheduled_at`:
    None when no backfill that drops slots covers it, or the server skipped nothing.

    All of it is the server's: its overlap-skip counter (`describe`), the backfill request
    (the scheduler's history), and for each slot of the request whether a workflow was
    started for it since (`describe` of `<job>-<slot>Z`). A slot counts as skipped when no
    run was started for it since the request, oldest first, and no more of them than the
    server's counter: while a longer backfill is still being worked through, a slot that
    has no run yet may simply not have been reached.

    The backfills are read first: the history never waits, while `describe` is a query of
    the scheduler workflow, which answers between its passes only; every run of a backfill
    that asked it first waited for the pass, up to a second and more. It is asked only
    when a backfill over the slot may have dropped slots (its own policy, or the
    schedule's: "", which the describe says).
    """
    requests = [
        r
        for r in _over(
            await backfill_requests(client, ask.job_name), ask.scheduled_at, ask.started_at
        )
        if r.drops("") or not r.overlap
    ]
    if not requests:
        return None
    try:
        described = await client.get_schedule_handle(ask.job_name).describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    counted = described.info.num_actions_skipped_overlap
    overlap = overlap_name(described.schedule.policy.overlap)
    dropping = [r for r in requests if r.drops(overlap)]
    if not counted or not dropping:
        return None
    request = dropping[-1]
    fires = ask.timing.fire_times(request.start, request.end + _TICK, limit=MAX_CHECKED + 1)
    others = [f for f in fires[:MAX_CHECKED] if f != ask.scheduled_at]

    async def started(fire: datetime) -> bool:
        handle = client.get_workflow_handle(slot_workflow_id(ask.job_name, fire))
        try:
            run = await handle.describe()
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return False
            raise
        return run.start_time >= request.requested_at

    found = await gather_by(others, started, limit=_CONCURRENCY)
    skipped = [f for f in others if not found[f]][:counted]
    if not skipped:
        return None
    return BackfillSkips(
        start=request.start,
        end=request.end,
        overlap=request.overlap or overlap,
        skipped=skipped,
        counted=counted,
        checked=min(len(fires), MAX_CHECKED),
        slots=len(fires),
    )


def dropped_slots(
    timing: Timing,
    requests: Iterable[BackfillRequest],
    recorded: Iterable[datetime],
    schedule_overlap: str,
    since: datetime | None = None,
) -> list[DroppedSlot]:
    """The fire times of backfills (requested at or after `since`) that may drop slots
    which have no ledger row: the server skipped them, nothing ran them since."""
    seen = set(recorded)
    dropped: dict[datetime, DroppedSlot] = {}
    for request in requests:
        if not request.drops(schedule_overlap):
            continue
        if since is not None and request.requested_at < since:
            continue
        for fire in timing.fire_times(request.start, request.end + _TICK):
            if fire not in seen:
                dropped.setdefault(fire, DroppedSlot(fire, request))
    return [dropped[fire] for fire in sorted(dropped)]
