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
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.api.enums.v1 import ScheduleOverlapPolicy
from temporalio.api.schedule.v1 import SchedulePatch
from temporalio.converter import PayloadConverter
from temporalio.service import RPCError

from timing import Timing

logger = logging.getLogger(__name__)

SCHEDULER_WORKFLOW_PREFIX = "temporal-sys-scheduler:"
_TICK = timedelta(microseconds=1)
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
        for r in await backfill_requests(client, schedule_id)
        if r.start <= fire <= r.end
        and r.drops(schedule_overlap)
        and (before is None or r.requested_at <= before)
    ]
    return covering[-1] if covering else None


def overlap_name(policy: int) -> str:
    """The name (`skip`, `buffer_all`, ...) of a schedule's overlap policy ("" if unset)."""
    return _DROPPING.get(policy) or _KEPT.get(policy) or ""


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
