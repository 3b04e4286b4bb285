"""One runtime schedule's slots: trigger, backfill, the next fire times, explain a slot,
and its runs from the ledger (`job_executions.job_name = 'rt-<id>'`).

A trigger or a backfill records intents (`runtime_dispatch_intents`) that the dispatcher
starts; each runs under its own ledger row like any slot, so a slot that already completed
is a no-op when it runs again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from temporalio.service import RPCError

import schedules.tenants.dispatch as dispatch
import schedules.tenants.ownership as ownership
import schedules.tenants.store as store
from activities.claim.executions import Clock, utcnow
from activities.runtime.models import ledger_name
from activities.runtime.models import slot_workflow_id as workflow_id
from activities.runtime.start import Intent
from core.errors import InvalidScheduleError, ScheduleNotFoundError
from schedules.tenants.api import utc_text
from schedules.tenants.fires import FireTime, due_time, next_fire_times
from schedules.tenants.model import FIRST_YEAR, LAST_YEAR, Schedule, checked_by
from schedules.tenants.store import Database

MAX_BACKFILL = 1000


def checked_time(name: str, value: datetime) -> datetime:
    """A time a caller gives (a slot, a bound): with its UTC offset, in the years jobs run
    in (as the CLI's times, `schedules.catalog.times.parse_time`); else one
    `InvalidScheduleError` line naming `name` and the value."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidScheduleError(f"{name}: must name its UTC offset, got {value.isoformat()}")
    if not FIRST_YEAR <= value.year <= LAST_YEAR:
        raise InvalidScheduleError(
            f"{name}: {value.isoformat()} is outside the years {FIRST_YEAR} to {LAST_YEAR} "
            "that jobs run in"
        )
    return value


@dataclass(frozen=True)
class Requested:
    """Slots asked for: those recorded now, and those already recorded before; of a
    trigger given a client, the workflow ids it started, or why it could not start its
    run (recorded all the same: the dispatcher's next tick starts it); of a dry-run
    backfill, `would_run`: the slots it would record (and `already`, those it would
    leave alone)."""

    schedule: Schedule
    recorded: list[Intent]
    already: list[datetime]
    started: list[str] = field(default_factory=list)
    not_started: str | None = None
    would_run: list[datetime] = field(default_factory=list)


async def _live(conn: Any, schedule_id: int, tenant: str | None = None) -> Schedule:
    found = await store.by_id(conn, schedule_id, tenant=tenant)
    if found.deleted_at is not None:
        raise ScheduleNotFoundError(f"runtime schedule {schedule_id} was deleted")
    return found


async def _record(
    conn: Any,
    schedule: Schedule,
    slots: list[datetime],
    origin: str,
    now: datetime,
    by: str,
    due: dict[datetime, datetime] | None = None,
) -> tuple[list[Intent], list[datetime]]:
    """Record an intent per slot (`due`: when each slot a business calendar moved is due);
    the recorded ones, and the slots that had one already."""
    rows = await store.all_rows(
        conn,
        "add_intent",
        {
            "schedule_id": schedule.id,
            "slots": slots,
            "workflow_ids": [workflow_id(schedule.id, s) for s in slots],
            "dues": [(due or {}).get(s) for s in slots],
            "origin": origin,
            "now": now,
            "by": by,
        },
    )
    recorded = [Intent(**row) for row in rows]
    taken = {i.scheduled_at for i in recorded}
    return recorded, [s for s in slots if s not in taken]


async def trigger(
    db: Database,
    schedule_id: int,
    *,
    by: str = "",
    client: Any = None,
    task_queue: str | None = None,
    tenant: str | None = None,
    clock: Clock = utcnow,
) -> Requested:
    """Run the schedule once now (slot: now, to the second), as a `manual` run, paused or
    not. The intent is recorded; with a Temporal `client` and the fleet's `task_queue` it
    is also started at once (`dispatch.start_slot`) and marked started, else the
    dispatcher's next tick starts it. A start Temporal refuses or cannot take is reported
    in `not_started`, not raised: the intent is committed, and the next tick starts it."""
    checked_by(by)
    now = clock().replace(microsecond=0)
    async with store.transaction(db) as conn:
        schedule = await _live(conn, schedule_id, tenant)
        await ownership.refuse(conn, [("", schedule)])  # what it names may have moved
        recorded, already = await _record(conn, schedule, [now], "manual", now, by)
        if recorded:
            await store.log_change(
                conn, schedule_id, "trigger", before=None, after=None, now=now, by=by,
                detail={"slot": utc_text(now)},
            )  # fmt: skip
    if client is None or not recorded:
        return Requested(schedule, recorded, already)
    (intent,) = recorded
    try:
        if not await dispatch.start_slot(client, intent, task_queue=task_queue):
            return Requested(schedule, recorded, already)  # a tick started it first
    except (RPCError, TimeoutError) as exc:  # Temporal away, or refusing
        lines = str(exc).strip().splitlines() or [type(exc).__name__]
        return Requested(schedule, recorded, already, not_started=lines[0])
    async with store.transaction(db) as conn:
        await store.one(conn, "mark_started", {"schedule_id": schedule_id, "slot": now})
    return Requested(schedule, recorded, already, [intent.workflow_id])


async def backfill(
    db: Database,
    schedule_id: int,
    start: datetime,
    end: datetime,
    *,
    dry_run: bool = False,
    by: str = "",
    limit: int = MAX_BACKFILL,
    tenant: str | None = None,
    clock: Clock = utcnow,
) -> Requested:
    """Run the schedule's fire times in `[start, end)` again, as `backfill` runs: each is
    recorded as an intent for the dispatcher (one already recorded is left alone). Only
    past times: `end` after now is refused, as are more than `limit` times. `dry_run`
    records nothing: its `would_run` names the slots it would record, `already` those
    recorded before."""
    checked_by(by)
    start, end = checked_time("start", start), checked_time("end", end)
    now = clock()
    if start >= end:
        raise InvalidScheduleError(f"start: {utc_text(start)} is not before end {utc_text(end)}")
    if end > now:
        raise InvalidScheduleError(
            f"end: {utc_text(end)} is after now ({utc_text(now)}); a backfill runs past fire "
            "times only, the dispatcher runs the others at their time"
        )
    async with store.transaction(db) as conn:
        schedule = await _live(conn, schedule_id, tenant)
        await ownership.refuse(conn, [("", schedule)])  # what it names may have moved
        # The slots whose fire times (where a business calendar moved them) fall in range.
        fires = schedule.timing.fires(start, end, limit=limit + 1)
        slots = [fire.slot for fire in fires]
        if len(slots) > limit:
            raise InvalidScheduleError(
                f"start / end: more than {limit} fire times of schedule {schedule_id} in "
                f"{utc_text(start)} to {utc_text(end)}; backfill a shorter range"
            )
        if dry_run:
            rows = await store.all_rows(
                conn, "intents_among", {"schedule_id": schedule.id, "slots": slots}
            )
            had = {row["scheduled_at"] for row in rows}
            would = [s for s in slots if s not in had]
            return Requested(schedule, [], [s for s in slots if s in had], would_run=would)
        if not slots:
            return Requested(schedule, [], [])
        due = {fire.slot: fire.at for fire in fires if fire.slot != fire.at}
        recorded, already = await _record(conn, schedule, slots, "backfill", now, by, due)
        if recorded:
            await store.log_change(
                conn, schedule_id, "backfill", before=None, after=None, now=now, by=by,
                detail={"start": utc_text(start), "end": utc_text(end), "slots": len(recorded)},
            )  # fmt: skip
    return Requested(schedule, recorded, already)


async def next_times(
    db: Database,
    schedule_id: int,
    count: int = 10,
    *,
    tenant: str | None = None,
    clock: Clock = utcnow,
) -> tuple[Schedule, list[FireTime]]:
    """The schedule's next `count` fire times after now (or after the timing in force
    began, if later), each with its DST note."""
    schedule = await _get(db, schedule_id, tenant)
    return schedule, next_fire_times(schedule, max(clock(), schedule.timing_since), count)


async def _get(db: Database, schedule_id: int, tenant: str | None = None) -> Schedule:
    async with store.transaction(db) as conn:
        return await store.by_id(conn, schedule_id, tenant=tenant)


@dataclass(frozen=True)
class Explanation:
    """What is known of one (schedule, slot), and the verdict in one line."""

    schedule: Schedule
    slot: datetime
    fire_time: bool
    workflow_id: str
    intent: dict[str, Any] | None
    execution: dict[str, Any] | None
    verdict: str

    @property
    def ran(self) -> bool:
        """The slot ran: its ledger row is completed (a catalog job's `explain` says the
        same, `schedules.health.explain.Verdict.ran`)."""
        return self.execution is not None and self.execution["status"] == "completed"

    @property
    def exit_code(self) -> int:
        """`explain`'s exit codes: 0 it ran, 1 it did not (the verdict says why)."""
        return 0 if self.ran else 1


async def explain(
    db: Database,
    schedule_id: int,
    slot: datetime,
    *,
    tenant: str | None = None,
    clock: Clock = utcnow,
) -> Explanation:
    """Whether `slot` is a fire time of the schedule, whether a start was decided for it
    (an intent), what the ledger recorded, and the verdict."""
    slot = checked_time("slot", slot)
    now = clock()
    async with store.transaction(db) as conn:
        schedule = await store.by_id(conn, schedule_id, tenant=tenant)
        intent = await store.one(conn, "intent_at", {"id": schedule_id, "slot": slot})
        execution = await store.one(
            conn, "execution_at", {"job": ledger_name(schedule_id), "slot": slot}
        )
        edit = await store.one(conn, "edited_slot", {"job": ledger_name(schedule_id), "slot": slot})
        waiting = execution is not None and execution.get("wait_status") == "waiting"
        paused = await _paused_upstreams(conn, schedule) if waiting else []
    due = due_time(schedule, slot)
    verdict = "; ".join([_verdict(schedule, slot, due, intent, execution, now), *paused])
    if edit is not None:
        verdict = f"{verdict}; {_edit_text(edit)}" if execution or intent else _edit_text(edit)
    return Explanation(
        schedule, slot, due is not None, workflow_id(schedule_id, slot), intent, execution, verdict
    )


def _edit_text(edit: dict[str, Any]) -> str:
    """What a timing edit decided for a slot it stranded (`schedules.edits`)."""
    what = "kept (started then)" if edit["outcome"] == "run" else "dropped"
    return (
        f"{what} by the timing edit of {utc_text(edit['edited_at'])}: it was due "
        f"{utc_text(edit['was_due_at'])} under the timing before; {edit['reason']}"
    )


async def _paused_upstreams(conn: Any, schedule: Schedule) -> list[str]:
    """The schedule's upstream schedules (of its tenant, by name) that are paused, each by
    whom and why: a slot waiting on one waits until it is resumed."""
    said = []
    for dep in schedule.depends_on:
        if dep.schedule is None:
            continue
        upstream = await store.live_by_name(conn, schedule.tenant, dep.schedule)
        if upstream is not None and upstream.paused:
            said.append(
                f"its upstream {dep.upstream} ({upstream.ledger_name}) is "
                f"{paused_text(upstream)}: its slots do not run until it is resumed"
            )
    return said


def _verdict(
    schedule: Schedule,
    slot: datetime,
    due: datetime | None,
    intent: dict[str, Any] | None,
    execution: dict[str, Any] | None,
    now: datetime,
) -> str:
    if execution is not None and execution.get("wait_status") == "waiting":
        return (
            f"running, {execution['wait_progress']}; deadline "
            f"{utc_text(execution['wait_deadline'])}"
        )
    if execution is not None:
        error = f": {execution['error']}" if execution.get("error") else ""
        return (
            f"{execution['status']} ({execution['origin']}, attempt {execution['attempt']}){error}"
        )
    if intent is not None:
        if intent["started_at"] is None:
            return f"{intent['origin']} start decided at {utc_text(intent['decided_at'])}, not started yet"
        return f"started at {utc_text(intent['started_at'])}, no ledger row yet"
    if due is None:
        if schedule.timing.plain.slots_at(slot) and (skipped := schedule.timing.what_of(slot)):
            return f"not run: its calendar {skipped}"
        return "not a fire time of this schedule, and nothing was recorded for it"
    moved = f" (its calendar moved it to {utc_text(due)})" if due != slot else ""
    if due > now:
        return f"a future fire time{moved}"
    if slot < schedule.timing_since:
        return f"a fire time before the timing in force began ({utc_text(schedule.timing_since)}): not run"
    if schedule.deleted_at is not None and slot >= schedule.deleted_at:
        return f"after the schedule was deleted ({utc_text(schedule.deleted_at)}): not run"
    if schedule.paused:
        return f"{paused_text(schedule)}: not run"
    if schedule.next_fire_at is not None and due >= schedule.next_fire_at:
        if schedule.deferred_at is not None:
            return f"{deferred_text(schedule, due, now)}{moved}"
        return f"due, not dispatched yet{moved}"
    return "missed: passed without an intent or a ledger row"  # fmt: skip


def deferred_text(schedule: Schedule, due: datetime, now: datetime) -> str:
    """`deferred by the tenant's limit: 2 in flight (limit 2), waited 40s`."""
    waited = max((now - due).total_seconds(), 0)
    return (
        f"deferred by the tenant's limit: {schedule.deferred_reason or 'at its limit'}, "
        f"waited {waited:.0f}s"
    )


def paused_text(schedule: Schedule) -> str:
    """`paused by support (card expired)`: that it is paused, by whom and why."""
    by = schedule.paused_by or "an unrecorded writer"
    return f"paused by {by} ({schedule.note or 'no note'})"


async def runs(
    db: Database,
    schedule_id: int,
    *,
    limit: int = 20,
    before: datetime | None = None,
    tenant: str | None = None,
) -> list[dict[str, Any]]:
    """The schedule's ledger rows (`job_executions`), newest slot first."""
    before = None if before is None else checked_time("before", before)
    async with store.transaction(db) as conn:
        await store.by_id(conn, schedule_id, tenant=tenant)
        return await store.all_rows(
            conn, "runs", {"job": ledger_name(schedule_id), "limit": limit, "before": before}
        )
