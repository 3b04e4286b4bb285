"""`/v1/tenants/{tenant}/...`: a tenant's dispatch limits and its notice channels (issue
40), each route one call of the library `python -m schedules tenants limits|notify` makes.

Roles: a tenant's key reads its own limits and channels; setting or clearing either is an
operator's action (an operator key). Another tenant, for a tenant's key, answers 404 as
a tenant that does not exist would. The limits are the operator's to hand out; the
channels are too, because the relay calls a webhook from inside the fleet's network: a
URL a tenant set itself could make the fleet call an address only the fleet can reach.

Neither resource is versioned (no `ETag`): a write replaces what it names, and both
record who (`updated_by`: the key) and when. The webhook's signing secret is in the answer
of the `PUT` that made or rotated it, and never again; the webhook URL (it may hold a
token) is shown as its scheme and host only.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Path, Response
from pydantic import BaseModel, ConfigDict, Field

from api.auth import Authorized
from api.deps import Conn, Settings
from api.keys import Caller
from api.problems import Problem
from api.routes.common import PROBLEMS
from core.text import unprintable
from schedules import tenants
from schedules.catalog.problems import short
from schedules.tenants.limits import MAX_WEIGHT
from schedules.tenants.model import MAX_TEXT
from schedules.tenants.notices import MAX_EMAILS, MAX_URL

_FORBIDDEN = {**PROBLEMS[403], "description": "a tenant's key asks for an operator's action"}
_NOT_FOUND = {**PROBLEMS[404], "description": "another tenant (a tenant's key); no channels"}
router = APIRouter(
    prefix="/v1/tenants/{tenant}",
    tags=["tenants"],
    responses=PROBLEMS | {403: _FORBIDDEN, 404: _NOT_FOUND},
)
Tenant = Annotated[str, Path(min_length=1, max_length=MAX_TEXT, description="the tenant")]
Count = Annotated[int | None, Field(ge=1, le=2**31 - 1)]


class LimitsChange(BaseModel):
    """The limits to set; a field not sent keeps its value (`DELETE` clears them all)."""

    model_config = ConfigDict(extra="forbid")
    max_in_flight: Count = None
    max_per_minute: Count = None
    weight: Annotated[int | None, Field(ge=1, le=MAX_WEIGHT)] = None


class Limits(BaseModel):
    """A tenant's own limits (null: the operator's default, given beside it), its weight
    in the dispatcher's round-robin, and what the dispatcher counts for it now."""

    tenant: str
    max_in_flight: int | None
    max_per_minute: int | None
    default_max_in_flight: int | None
    default_max_per_minute: int | None
    weight: int
    in_flight: int
    deferred: int
    updated_at: datetime | None
    updated_by: str


class ChannelsRequest(BaseModel):
    """Where the tenant's notices go, both replaced: a webhook, email addresses, or both."""

    model_config = ConfigDict(extra="forbid")
    webhook_url: Annotated[str | None, Field(max_length=MAX_URL)] = None
    emails: Annotated[list[str], Field(max_length=MAX_EMAILS)] = []
    rotate_secret: bool = False


class Channels(BaseModel):
    """A tenant's notice channels: the webhook as scheme and host (its path may hold a
    token), the addresses, and `secret` only in the answer that made or rotated it."""

    tenant: str
    webhook: str | None
    emails: list[str]
    secret: str | None = Field(
        default=None, description="whsec_...: only in the answer that made or rotated it"
    )
    updated_at: datetime | None
    updated_by: str


def _readable(caller: Caller, tenant: str) -> str:
    """The tenant, if the caller may read it: an operator any, a tenant's key its own
    (another answers 404, as a tenant that does not exist)."""
    if tenant != tenant.strip() or unprintable(tenant) is not None:
        raise Problem(
            422, f"tenant: must be a name without control characters, got {short(tenant)}"
        )
    if caller.tenant is not None and caller.tenant != tenant:
        raise Problem(404, f"no tenant {tenant!r}")
    return tenant


def _operator(caller: Caller, tenant: str, what: str) -> str:
    """The tenant, if the caller is an operator (a tenant's key: 403 for its own, 404 for
    another's)."""
    _readable(caller, tenant)
    if caller.tenant is not None:
        raise Problem(403, f"{what}: only an operator key sets them", code="forbidden")
    return tenant


def _limits(found: tenants.TenantLimits, settings: Settings) -> Limits:
    return Limits(
        tenant=found.tenant,
        max_in_flight=found.max_in_flight,
        max_per_minute=found.max_per_minute,
        default_max_in_flight=settings.runtime_tenant_max_in_flight,
        default_max_per_minute=settings.runtime_tenant_max_per_minute,
        weight=found.weight,
        in_flight=found.in_flight,
        deferred=found.deferred,
        updated_at=found.updated_at,
        updated_by=found.updated_by,
    )


@router.get("/limits")
async def get_limits(tenant: Tenant, caller: Authorized, conn: Conn, settings: Settings) -> Limits:
    """The tenant's limits, its weight, its runs in flight and its deferred schedules."""
    return _limits(await tenants.limits(conn, _readable(caller, tenant)), settings)


@router.patch("/limits")
async def set_limits(
    tenant: Tenant, change: LimitsChange, caller: Authorized, conn: Conn, settings: Settings
) -> Limits:
    """Set some of the tenant's limits (operator); the others keep their value. A change
    applies from the next decision of a dispatcher."""
    found = await tenants.set_limits(
        conn,
        _operator(caller, tenant, "limits"),
        max_in_flight=change.max_in_flight,
        max_per_minute=change.max_per_minute,
        weight=change.weight,
        by=caller.author,
    )
    return _limits(found, settings)


@router.delete("/limits")
async def clear_limits(
    tenant: Tenant, caller: Authorized, conn: Conn, settings: Settings
) -> Limits:
    """Back to the operator's defaults and weight 1 (operator)."""
    tenant = _operator(caller, tenant, "limits")
    return _limits(await tenants.clear_limits(conn, tenant, by=caller.author), settings)


def _channels(found: tenants.NoticeChannels) -> Channels:
    return Channels(
        tenant=found.tenant,
        webhook=found.webhook_shown,
        emails=found.emails,
        secret=found.secret if found.new_secret else None,
        updated_at=found.updated_at,
        updated_by=found.updated_by,
    )


@router.get("/notices")
async def get_notices(tenant: Tenant, caller: Authorized, conn: Conn) -> Channels:
    """Where the tenant's notices go (404 if nowhere); never the secret."""
    return _channels(await tenants.notices(conn, _readable(caller, tenant)))


@router.put("/notices")
async def set_notices(
    tenant: Tenant, channels: ChannelsRequest, caller: Authorized, conn: Conn
) -> Channels:
    """Send the tenant's notices here (operator), both replaced; the answer carries the
    signing secret when this call made it (the first `PUT`) or rotated it."""
    found = await tenants.set_notices(
        conn,
        _operator(caller, tenant, "notice channels"),
        webhook_url=channels.webhook_url,
        emails=channels.emails,
        rotate_secret=channels.rotate_secret,
        by=caller.author,
    )
    return _channels(found)


@router.delete("/notices", status_code=204, response_class=Response)
async def clear_notices(tenant: Tenant, caller: Authorized, conn: Conn) -> Response:
    """Send the tenant no more notices (operator); 404 if it had no channels."""
    if not await tenants.clear_notices(conn, _operator(caller, tenant, "notice channels")):
        raise Problem(404, f"tenant {tenant!r} has no notice channels")
    return Response(status_code=204)
