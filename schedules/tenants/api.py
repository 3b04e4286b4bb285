"""Create, update, pause, resume, delete, read and list runtime schedules.

Every function takes `db`, a connection string or the caller's psycopg `AsyncConnection`
(its transaction then holds the write: a savepoint), and `clock`, the time source (tests
pass a fixed one). Each write commits with its change-log row in one transaction, and
raises the schedule's `version`; an update names the version it read. Nothing is written
when a request is refused (`core.errors`: invalid input, quota, not found: exit 2; a
conflict: exit 1). A call on a schedule id takes `tenant` too (the HTTP API's keys): given,
another tenant's schedule is not found, in the words of an id that does not exist.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import schedules.tenants.dependencies as dependencies
import schedules.tenants.edits as edits
import schedules.tenants.ownership as ownership
import schedules.tenants.store as store
from activities.claim.executions import Clock, utcnow
from core.errors import (
    ConflictError,
    InvalidScheduleError,
    ScheduleNotFoundError,
    StaleVersionError,
)
from core.text import unprintable
from schedules.catalog.problems import short
from schedules.tenants.fires import next_fire_at
from schedules.tenants.model import (
    DEFINITION_FIELDS,
    MAX_TEXT,
    TIMING_FIELDS,
    Definition,
    Schedule,
    checked_by,
    checked_note,
    definition,
)
from schedules.tenants.quota import Quotas
from schedules.tenants.store import Database

# What `update` may change; tenant and name identify the schedule.
UPDATABLE = frozenset(DEFINITION_FIELDS) - {"calendar_definition"}  # set from `calendar`


@dataclass(frozen=True)
class Outcome:
    """A write's result: the schedule as stored, and whether anything changed."""

    schedule: Schedule
    changed: bool


@dataclass(frozen=True)
class Page:
    """One page of `list_schedules`; `next_after` continues it (None: the last page)."""

    schedules: list[Schedule]
    next_after: int | None


def as_definition(data: Definition | Mapping[str, Any]) -> Definition:
    if isinstance(data, Definition):
        return data
    if "calendar_definition" in data:  # resolved from `calendar`, never given
        raise InvalidScheduleError(
            f"schedule {data.get('tenant')!r}/{data.get('name')!r}: calendar_definition: is "
            "not a field of a runtime schedule; name a calendar (`calendar`)"
        )
    return definition(data)


async def create(
    db: Database,
    data: Definition | Mapping[str, Any],
    *,
    by: str = "",
    quotas: Quotas | None = None,
    clock: Clock = utcnow,
) -> Outcome:
    """Create a runtime schedule, idempotently per (tenant, name).

    The same definition again returns the stored schedule (`changed` False); another
    definition under that name is a `ConflictError` naming the stored one's id and
    version. The tenant's quota (count, minimum period) is checked in the transaction.
    """
    new = as_definition(data)
    checked_by(by)
    quotas = quotas or Quotas.from_environment()
    quotas.check_period(new)
    now = clock()
    async with store.transaction(db) as conn:
        # Sent together (pipeline mode): the tenant's lock, its name, its count.
        await store.lock_tenant(conn, new.tenant)
        named = await conn.execute(
            store.Q["live_by_name"], {"tenant": new.tenant, "name": new.name}
        )
        counted = await conn.execute(store.Q["count_tenant"], {"tenant": new.tenant})
        existing = await named.fetchone()
        if existing is not None:
            return Outcome(_same_or_conflict(Schedule.of_row(existing), new), changed=False)
        row = await counted.fetchone()
        quotas.check_count(new.tenant, row["n"] if row else 0, 1)
        await ownership.refuse(conn, [("", new)])
        if new.depends_on:
            others = await dependencies.tenant_set(conn, new.tenant, [new])
            dependencies.check(new.tenant, others | {new.name: new}, {new.name}, now)
        stored = await store.insert(
            conn, new, next_fire_at=next_fire_at(new, now, now), now=now, by=by
        )
        assert stored is not None  # the tenant lock keeps its names for us
        return Outcome(stored, changed=True)


def _same_or_conflict(existing: Schedule, new: Definition) -> Schedule:
    if existing.same_definition(new):
        return existing
    differs = [f for f in DEFINITION_FIELDS if getattr(existing, f) != getattr(new, f)]
    raise ConflictError(
        f"schedule {new.tenant!r}/{new.name!r} exists (id {existing.id}, version "
        f"{existing.version}) with another {', '.join(differs)}; update it with its version, "
        "or delete it first"
    )


async def get(db: Database, schedule_id: int, *, tenant: str | None = None) -> Schedule:
    """The schedule `schedule_id` (a deleted one too: `deleted_at` says so); given a
    `tenant`, only if it is that tenant's (`store.by_id`)."""
    async with store.transaction(db) as conn:
        return await store.by_id(conn, schedule_id, tenant=tenant)


def searched(field: str, value: str | None) -> str | None:
    """A text to look for (a tenant, a name, a kind): what is stored is printable text of
    at most `MAX_TEXT` characters, so anything else (a NUL, which PostgreSQL refuses) is
    one `InvalidScheduleError` line naming the field and the value."""
    if value is not None and (len(value) > MAX_TEXT or unprintable(value) is not None):
        raise InvalidScheduleError(
            f"{field}: must be at most {MAX_TEXT} printable characters, got {short(value)}"
        )
    return value


async def find(db: Database, tenant: str, name: str) -> Schedule:
    """The live schedule of `tenant` named `name`, or `ScheduleNotFoundError`."""
    searched("tenant", tenant)
    searched("name", name)
    async with store.transaction(db) as conn:
        found = await store.live_by_name(conn, tenant, name)
    if found is None:
        raise ScheduleNotFoundError(f"tenant {tenant!r} has no schedule named {name!r}")
    return found


async def _live_locked(
    conn: Any,
    schedule_id: int,
    expected_version: int | None,
    *,
    deleted_ok: bool = False,
    tenant: str | None = None,
) -> Schedule:
    """The schedule, locked, if live and at `expected_version` (when given); a deleted one
    is refused, unless `deleted_ok` (then returned as it is, whatever its version). Given
    a `tenant`, another tenant's is not found (`store.by_id`)."""
    current = await store.by_id(conn, schedule_id, lock=True, tenant=tenant)
    if current.deleted_at is not None and deleted_ok:
        return current
    if current.deleted_at is not None:
        raise ScheduleNotFoundError(
            f"runtime schedule {schedule_id} ({current.tenant!r}/{current.name!r}) was "
            f"deleted at {utc_text(current.deleted_at)}"
        )
    if expected_version is not None and current.version != expected_version:
        raise StaleVersionError(
            f"runtime schedule {schedule_id}: expected version {expected_version}, but the "
            f"current version is {current.version} (by {current.updated_by or 'unknown'} at "
            f"{utc_text(current.updated_at)}); read it again and retry"
        )
    return current


async def _change(
    db: Database,
    schedule_id: int,
    expected_version: int | None,
    action: str,
    by: str,
    now: datetime,
    decide: Callable[[Schedule], Schedule | None],
    *,
    deleted_ok: bool = False,
    tenant: str | None = None,
    detail: dict[str, Any] | None = None,
) -> Outcome:
    """One write of a live schedule (or a deleted one, `deleted_ok`): locked (at
    `expected_version` when given), its new state from `decide` (None: nothing to change),
    written with its change-log row. A change of its dependencies or its timing is checked
    against the tenant's other schedules first, and a delete refuses to orphan the
    schedules that depend on it (`schedules.tenants.dependencies`), under the tenant's lock."""
    checked_by(by)
    async with store.transaction(db) as conn:
        current = await _live_locked(
            conn, schedule_id, expected_version, deleted_ok=deleted_ok, tenant=tenant
        )
        new = decide(current)
        if new is None:
            return Outcome(current, changed=False)
        if action == "update":
            await ownership.refuse(conn, [("", new)])
        if action == "delete":
            await store.lock_tenant(conn, current.tenant)
            await dependencies.refuse_orphaning(conn, current.tenant, [current.name])
        elif new.depends_on != current.depends_on or new.timing != current.timing:
            await store.lock_tenant(conn, current.tenant)
            others = await dependencies.tenant_set(conn, current.tenant, [current, new])
            dependencies.check(current.tenant, others | {new.name: new}, {new.name}, now)
        stored = await store.write_logged(conn, current, new, action, now=now, by=by, detail=detail)
        if action == "update" and new.timing != current.timing:
            await edits.decide_stranded(conn, current, new, now, by)
        return Outcome(stored, changed=True)


async def update(
    db: Database,
    schedule_id: int,
    expected_version: int,
    changes: Mapping[str, Any],
    *,
    by: str = "",
    quotas: Quotas | None = None,
    tenant: str | None = None,
    clock: Clock = utcnow,
) -> Outcome:
    """Change fields of a schedule (`UPDATABLE`), if its version is still `expected_version`
    (else `ConflictError` naming the current one).

    A change of its timing (cron, zone, bounds) applies to fire times after now only: the
    timing in force begins now (`timing_since`) and the next slot is recomputed; no missed
    run is invented, and none a business calendar had moved past now is dropped silently
    (`schedules.tenants.edits`). Other changes keep the next slot.
    """
    unknown = sorted(set(changes) - UPDATABLE)
    if unknown:
        raise InvalidScheduleError(
            f"{unknown[0]}: cannot be updated (updatable: {', '.join(sorted(UPDATABLE))})"
        )
    quotas = quotas or Quotas.from_environment()
    now = clock()

    def updated(current: Schedule) -> Schedule | None:
        base = current.model_dump(include=set(Definition.model_fields))
        if "calendar" in changes:  # resolved from the name again (its definition today)
            base.pop("calendar_definition", None)
            if changes["calendar"] is None:
                base.pop("on_holiday", None)
        merged = definition(base | changes)
        quotas.check_period(merged)
        if all(getattr(merged, f) == getattr(current, f) for f in DEFINITION_FIELDS):
            return None
        new = current.model_copy(update={f: getattr(merged, f) for f in DEFINITION_FIELDS})
        if any(getattr(merged, f) != getattr(current, f) for f in TIMING_FIELDS):
            new = new.model_copy(
                update={"timing_since": now, "next_fire_at": next_fire_at(merged, now, now)}
            )
        return new

    return await _change(
        db, schedule_id, expected_version, "update", by, now, updated, tenant=tenant
    )


async def pause(
    db: Database,
    schedule_id: int,
    note: str,
    *,
    by: str = "",
    expected_version: int | None = None,
    tenant: str | None = None,
    clock: Clock = utcnow,
) -> Outcome:
    """Pause a schedule, saying why: no slot of it is dispatched while it is paused (the
    dispatcher's next tick sees it). A run in flight goes on."""
    checked_note(note)

    def paused(current: Schedule) -> Schedule | None:
        if current.paused and current.note == note:
            return None
        return current.model_copy(update={"paused": True, "note": note, "paused_by": by})

    return await _change(
        db, schedule_id, expected_version, "pause", by, clock(), paused, tenant=tenant
    )


async def resume(
    db: Database,
    schedule_id: int,
    *,
    note: str | None = None,
    by: str = "",
    expected_version: int | None = None,
    tenant: str | None = None,
    clock: Clock = utcnow,
) -> Outcome:
    """Lift a pause, saying why if `note` is given (kept in the change log's row of the
    resume, as a pause's note is in its own). Fire times that passed while paused do not
    run: the next slot is the first fire time after now."""
    if note is not None:
        note = checked_note(note, why="the schedule is resumed")
    now = clock()

    def resumed(current: Schedule) -> Schedule | None:
        if not current.paused:
            return None
        next_at = next_fire_at(current, now, current.timing_since)
        update = {"paused": False, "note": "", "paused_by": None, "next_fire_at": next_at}
        return current.model_copy(update=update)

    detail = None if note is None else {"note": note}
    return await _change(
        db, schedule_id, expected_version, "resume", by, now, resumed, tenant=tenant, detail=detail
    )


async def delete(
    db: Database,
    schedule_id: int,
    *,
    by: str = "",
    expected_version: int | None = None,
    tenant: str | None = None,
    clock: Clock = utcnow,
) -> Outcome:
    """Soft-delete a schedule: no later slot is dispatched, a run in flight goes on, and
    its record (ledger, intents, change log) stays. Its name is free again at once."""
    now = clock()

    def deleted(current: Schedule) -> Schedule | None:
        if current.deleted_at is not None:
            return None  # deleted before: a delete is idempotent
        return current.model_copy(update={"deleted_at": now, "next_fire_at": None})

    return await _change(
        db, schedule_id, expected_version, "delete", by, now, deleted, deleted_ok=True,
        tenant=tenant,
    )  # fmt: skip


async def list_schedules(
    db: Database,
    *,
    tenant: str | None = None,
    kind: str | None = None,
    paused: bool | None = None,
    due: bool = False,
    after: int = 0,
    limit: int = 100,
    clock: Clock = utcnow,
) -> Page:
    """Live schedules by id, filtered (each filter when given); `due`: those whose next
    slot is at or before now and not paused. Page on with `after=page.next_after`."""
    if not 1 <= limit <= 10_000:
        raise InvalidScheduleError(f"limit: must be from 1 to 10000, got {limit}")
    searched("tenant", tenant)
    searched("kind", kind)
    params = {
        "tenant": tenant,
        "kind": kind,
        "paused": paused,
        "due": clock() if due else None,
        "after": after,
        "limit": limit,
    }
    async with store.transaction(db) as conn:
        rows = await store.all_rows(conn, "list", params)
    found = [Schedule.of_row(row) for row in rows]
    return Page(found, found[-1].id if len(found) == limit else None)


async def changes(db: Database, schedule_id: int, limit: int = 50) -> list[dict[str, Any]]:
    """The schedule's change log, newest first."""
    async with store.transaction(db) as conn:
        return await store.all_rows(conn, "changes_of", {"id": schedule_id, "limit": limit})


def utc_text(instant: datetime) -> str:
    """`2027-03-14T07:00:00Z`."""
    return f"{instant.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"
