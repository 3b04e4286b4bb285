"""`/v1/schedules`: create, list, read, update and delete runtime schedules, each route
one call of `schedules.tenants`, scoped to the caller's tenant."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.responses import JSONResponse

from api import idempotency
from api.auth import Authorized
from api.deps import Conn, Settings
from api.problems import Problem
from api.routes.common import (
    MAX_ID,
    PROBLEMS,
    ScheduleId,
    answer,
    expected_version,
    json_object,
    schema,
    tenant_of,
)
from api.schemas import body
from schedules import tenants
from schedules.tenants import Quotas

router = APIRouter(prefix="/v1/schedules", tags=["schedules"], responses=PROBLEMS)
ONE = {200: schema("Schedule", "the schedule; its version is the ETag")}
IfMatch = Annotated[str | None, Header(description='the ETag you read, e.g. "3"')]


@router.post(
    "",
    status_code=201,
    openapi_extra=body("ScheduleDefinition"),
    responses={
        201: schema("Schedule", "created"),
        200: schema("Schedule", "it existed with this very definition (or the key's replay)"),
    },
)
async def create_schedule(
    request: Request,
    caller: Authorized,
    conn: Conn,
    settings: Settings,
    idempotency_key: Annotated[
        str | None, Header(description="the same key again answers the first request's schedule")
    ] = None,
) -> Response:
    """Create a schedule, idempotently per tenant and name: the same definition again
    answers 200 with the stored one; another definition under that name is 409."""
    data = await json_object(request)
    data["tenant"] = tenant_of(caller, data.get("tenant"))

    def create():
        return tenants.create(conn, data, by=caller.author, quotas=Quotas.of(settings))

    raw = await request.body()
    schedule, changed = await idempotency.once(conn, caller, idempotency_key, raw, create)
    location = {"Location": f"{router.prefix}/{schedule.id}"}
    return answer(schedule, 201 if changed else 200, location)


@router.get("", responses={200: schema("SchedulePage", "one page, by id")})
async def list_schedules(
    caller: Authorized,
    conn: Conn,
    tenant: Annotated[str | None, Query(description="operator keys: only this tenant's")] = None,
    kind: str | None = None,
    paused: bool | None = None,
    due: Annotated[bool, Query(description="only those due now and not paused")] = False,
    cursor: Annotated[int, Query(ge=0, le=MAX_ID, description="a page's next_cursor")] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> Response:
    """Live schedules by id, filtered; page on with `cursor=<next_cursor>`."""
    page = await tenants.list_schedules(
        conn,
        tenant=tenant_of(caller, tenant),
        kind=kind,
        paused=paused,
        due=due,
        after=cursor,
        limit=limit,
    )
    found = [s.model_dump(mode="json") for s in page.schedules]
    return JSONResponse({"schedules": found, "next_cursor": page.next_after})


@router.get("/by-name/{name}", responses=ONE)
async def find_schedule(
    name: str,
    caller: Authorized,
    conn: Conn,
    tenant: Annotated[str | None, Query(description="operator keys: the tenant")] = None,
) -> Response:
    """The tenant's live schedule named `name`."""
    owner = tenant_of(caller, tenant)
    if owner is None:
        raise Problem(422, "tenant: is required with an operator's key")
    return answer(await tenants.find(conn, owner, name))


@router.get("/{schedule_id}", responses=ONE)
async def read_schedule(schedule_id: ScheduleId, caller: Authorized, conn: Conn) -> Response:
    """The schedule (a deleted one too: `deleted_at` says so); its version is the ETag."""
    return answer(await tenants.get(conn, schedule_id, tenant=caller.tenant))


@router.patch("/{schedule_id}", responses=ONE, openapi_extra=body("ScheduleChanges"))
async def update_schedule(
    schedule_id: ScheduleId,
    request: Request,
    caller: Authorized,
    conn: Conn,
    settings: Settings,
    if_match: IfMatch = None,
) -> Response:
    """Change fields of the schedule at the version `If-Match` names (412 if it moved
    on, 428 without it); a field sent as null is cleared."""
    version = expected_version(if_match, required=True)
    changes = await json_object(request)
    if version is None:  # `*`: whatever the current version is
        version = (await tenants.get(conn, schedule_id, tenant=caller.tenant)).version
    outcome = await tenants.update(
        conn,
        schedule_id,
        version,
        changes,
        by=caller.author,
        quotas=Quotas.of(settings),
        tenant=caller.tenant,
    )
    return answer(outcome.schedule)


@router.delete("/{schedule_id}", responses=ONE)
async def delete_schedule(
    schedule_id: ScheduleId, caller: Authorized, conn: Conn, if_match: IfMatch = None
) -> Response:
    """Delete the schedule (soft: a run in flight goes on; its record stays); again is a
    no-op. With `If-Match`, only at that version."""
    outcome = await tenants.delete(
        conn,
        schedule_id,
        by=caller.author,
        expected_version=expected_version(if_match, required=False),
        tenant=caller.tenant,
    )
    return answer(outcome.schedule)
