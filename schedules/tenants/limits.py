"""A tenant's own dispatch limits and weight (issue 40): `set_limits`, `limits`,
`clear_limits`; `python -m schedules tenants limits set|show|clear TENANT`.

The dispatcher holds a tenant to at most `max_in_flight` runs in flight and
`max_per_minute` slots started a minute (activities/runtime/tenant_limits.py), and takes its due
slots `weight` at a time in its round-robin across tenants. A limit not set takes the
operator's default (`RUNTIME_TENANT_MAX_IN_FLIGHT`, `RUNTIME_TENANT_MAX_PER_MINUTE`;
unset: none). A change applies from the next decision of a dispatcher.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import schedules.tenants.store as store
from core.errors import InvalidScheduleError, ScheduleNotFoundError
from schedules.tenants.model import MAX_TEXT, checked_by
from schedules.tenants.store import Database

MAX_WEIGHT = 1000
MAX_FAILURES = 1000


@dataclass(frozen=True)
class TenantLimits:
    """A tenant's own settings (None: the operator's default), and what the dispatcher
    counts for it now."""

    tenant: str
    max_in_flight: int | None = None
    max_per_minute: int | None = None
    weight: int = 1
    updated_at: datetime | None = None
    updated_by: str = ""
    in_flight: int = 0
    deferred: int = 0


def checked_tenant(tenant: str) -> str:
    if not isinstance(tenant, str) or not tenant.strip() or len(tenant) > MAX_TEXT:
        raise InvalidScheduleError(
            f"tenant: must be a non-empty name of at most {MAX_TEXT} characters, got {tenant!r}"
        )
    return tenant


def checked_count(field: str, value: Any, most: int = 2**31 - 1) -> int | None:
    """A limit or weight: None (not given) or a positive int; else one line naming it."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= most:
        raise InvalidScheduleError(
            f"{field}: must be a positive whole number (at most {most}), got {value!r}"
        )
    return value


async def set_limits(
    db: Database,
    tenant: str,
    *,
    max_in_flight: int | None = None,
    max_per_minute: int | None = None,
    weight: int | None = None,
    by: str = "",
) -> TenantLimits:
    """Set the given limits of `tenant` (the others stay as they are); validated first,
    nothing written on bad input (`InvalidScheduleError`, naming the field)."""
    params = {
        "tenant": checked_tenant(tenant),
        "max_in_flight": checked_count("max_in_flight", max_in_flight),
        "max_per_minute": checked_count("max_per_minute", max_per_minute),
        "weight": checked_count("weight", weight, MAX_WEIGHT),
        "by": checked_by(by),
    }
    if params["max_in_flight"] is None and params["max_per_minute"] is None and weight is None:
        raise InvalidScheduleError(
            "limits: give at least one of max_in_flight, max_per_minute, weight"
        )
    async with store.transaction(db) as conn:
        await store.one(conn, "set_tenant_limits", params)
    return await limits(db, tenant)


async def limits(db: Database, tenant: str) -> TenantLimits:
    """The tenant's own settings (the defaults' if it has none) and its runs in flight."""
    async with store.transaction(db) as conn:
        row = await store.one(conn, "tenant_limits", {"tenant": checked_tenant(tenant)})
        counts = await store.one(conn, "tenant_in_flight", {"tenant": tenant})
    own = row or {"tenant": tenant}
    return TenantLimits(**own, **(counts or {}))


async def set_pause_after_failures(
    db: Database, schedule_id: int, failures: int | None, *, by: str = ""
) -> None:
    """Pause the schedule after `failures` consecutive failed slots (None: never). The
    pause is `paused_by = 'auto'` with a note naming the slots and the last error; a
    resume starts the count again. `ScheduleNotFoundError` for an unknown or deleted id."""
    params = {
        "id": schedule_id,
        "k": checked_count("pause_after_failures", failures, MAX_FAILURES),
        "by": checked_by(by),
    }
    async with store.transaction(db) as conn:
        if await store.one(conn, "set_pause_after_failures", params) is None:
            raise ScheduleNotFoundError(f"no live runtime schedule has id {schedule_id}")


async def clear_limits(db: Database, tenant: str, *, by: str = "") -> TenantLimits:
    """Back to the operator's defaults and weight 1."""
    params = {"tenant": checked_tenant(tenant), "by": checked_by(by)}
    async with store.transaction(db) as conn:
        await store.one(conn, "clear_tenant_limits", params)
    return await limits(db, tenant)
