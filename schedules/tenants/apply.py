"""`apply(tenant, desired)`: make one tenant's set of runtime schedules exactly the given
one, in one transaction, and report what changed.

Matched by name: a desired schedule the tenant lacks is created, one that differs is
updated (its definition, and its pause state), a stored one not desired is deleted (soft).
Every desired schedule is validated, and the quotas checked, before anything is written;
a refusal writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import schedules.tenants.dependencies as dependencies
import schedules.tenants.edits as edits
import schedules.tenants.ownership as ownership
import schedules.tenants.store as store
from activities.claim.executions import Clock, utcnow
from core.errors import InvalidScheduleError
from schedules.tenants.api import as_definition, searched
from schedules.tenants.fires import next_fire_at
from schedules.tenants.model import (
    DEFINITION_FIELDS,
    TIMING_FIELDS,
    Definition,
    Schedule,
    checked_by,
)
from schedules.tenants.quota import Quotas
from schedules.tenants.store import Database


@dataclass
class ApplyReport:
    """Names created, updated (with the fields that changed), deleted and left alone."""

    created: list[str] = field(default_factory=list)
    updated: dict[str, list[str]] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated or self.deleted)


def _desired(
    tenant: str, desired: Iterable[Definition | Mapping[str, Any]]
) -> dict[str, Definition]:
    found: dict[str, Definition] = {}
    for item in desired:
        new = as_definition({"tenant": tenant, **item} if isinstance(item, Mapping) else item)
        if new.tenant != tenant:
            raise InvalidScheduleError(
                f"schedule {new.tenant!r}/{new.name!r}: tenant: apply for {tenant!r} "
                f"takes only that tenant's schedules (got {new.tenant!r})"
            )
        if new.name in found:
            raise InvalidScheduleError(
                f"schedule {tenant!r}/{new.name!r}: name: given twice in the desired set"
            )
        found[new.name] = new
    return found


def _differences(current: Schedule, new: Definition) -> list[str]:
    fields = [f for f in DEFINITION_FIELDS if getattr(current, f) != getattr(new, f)]
    if current.paused != new.paused or (new.paused and current.note != new.note):
        fields.append("paused")
    return fields


async def apply(
    db: Database,
    tenant: str,
    desired: Iterable[Definition | Mapping[str, Any]],
    *,
    by: str = "",
    dry_run: bool = False,
    quotas: Quotas | None = None,
    clock: Clock = utcnow,
) -> ApplyReport:
    """Make `tenant`'s live schedules exactly `desired` (mappings may leave out `tenant`).

    `dry_run` reports what would change and writes nothing.
    """
    checked_by(by)
    searched("tenant", tenant)
    wanted = _desired(tenant, desired)
    quotas = quotas or Quotas.from_environment()
    for new in wanted.values():
        quotas.check_period(new)
    quotas.check_count(tenant, 0, len(wanted))
    now = clock()
    async with store.transaction(db) as conn:
        await store.lock_tenant(conn, tenant)
        rows = await store.all_rows(conn, "tenant_live", {"tenant": tenant})
        stored = {row["name"]: Schedule.of_row(row) for row in rows}
        report = _plan(stored, wanted)
        changed = set(report.created) | set(report.updated) | set(report.deleted)
        dependencies.check(tenant, dict(wanted), changed, now)
        await ownership.refuse(conn, [("", new) for new in wanted.values()])
        if dry_run:
            return report
        for name in report.created:
            await _create(conn, wanted[name], now, by)
        for name in report.updated:
            await _update(conn, stored[name], wanted[name], now, by)
        for name in report.deleted:
            current = stored[name]
            gone = current.model_copy(update={"deleted_at": now, "next_fire_at": None})
            await store.write_logged(conn, current, gone, "delete", now=now, by=by)
    return report


def _plan(stored: dict[str, Schedule], wanted: dict[str, Definition]) -> ApplyReport:
    """What makes `stored` into `wanted`, by name."""
    report = ApplyReport()
    for name, new in sorted(wanted.items()):
        current = stored.get(name)
        if current is None:
            report.created.append(name)
        elif differs := _differences(current, new):
            report.updated[name] = differs
        else:
            report.unchanged.append(name)
    report.deleted = sorted(set(stored) - set(wanted))
    return report


async def _create(conn: Any, new: Definition, now: Any, by: str) -> None:
    stored = await store.insert(conn, new, next_fire_at=next_fire_at(new, now, now), now=now, by=by)
    assert stored is not None  # the tenant lock holds its names


async def _update(conn: Any, current: Schedule, new: Definition, now: Any, by: str) -> None:
    changes: dict[str, Any] = {f: getattr(new, f) for f in DEFINITION_FIELDS}
    if any(getattr(current, f) != getattr(new, f) for f in TIMING_FIELDS):
        changes |= {"timing_since": now, "next_fire_at": next_fire_at(new, now, now)}
    if new.paused and not current.paused:
        changes |= {"paused": True, "note": new.note, "paused_by": by}
    elif new.paused:
        changes |= {"note": new.note}
    elif current.paused:
        since = changes.get("timing_since", current.timing_since)
        changes |= {
            "paused": False,
            "note": "",
            "paused_by": None,
            "next_fire_at": next_fire_at(new, now, since),
        }
    # A change of the pause state is logged as a pause or a resume, as `tenants pause` and
    # `resume` log it: the audit reads a schedule's pauses from those rows.
    action = "update"
    if new.paused != current.paused:
        action = "pause" if new.paused else "resume"
    await store.write_logged(
        conn, current, current.model_copy(update=changes), action, now=now, by=by
    )
    if "timing_since" in changes:
        await edits.decide_stranded(conn, current, new, now, by)
