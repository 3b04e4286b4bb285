"""`/v1/schedules`: runtime schedules, each route one call of `schedules.tenants`."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from api.auth import Authorized
from api.deps import Conn, Settings
from api.routes.common import ScheduleId, answer, json_object, schema, tenant_of
from api.schemas import body
from schedules import tenants
from schedules.tenants import Quotas

router = APIRouter(prefix="/v1/schedules", tags=["schedules"])
ONE = {200: schema("Schedule", "the schedule")}


@router.post(
    "",
    status_code=201,
    openapi_extra=body("ScheduleDefinition"),
    responses={
        201: schema("Schedule", "created"),
        200: schema("Schedule", "it existed with this very definition"),
    },
)
async def create_schedule(
    request: Request, caller: Authorized, conn: Conn, settings: Settings
) -> Response:
    """Create a schedule, idempotently per tenant and name: the same definition again
    answers 200 with the stored one; another definition under that name is 409."""
    data = await json_object(request)
    data["tenant"] = tenant_of(caller, data.get("tenant"))
    outcome = await tenants.create(conn, data, by=caller.author, quotas=Quotas.of(settings))
    location = {"Location": f"{router.prefix}/{outcome.schedule.id}"}
    return answer(outcome.schedule, 201 if outcome.changed else 200, location)


@router.get("/{schedule_id}", responses=ONE)
async def read_schedule(schedule_id: ScheduleId, caller: Authorized, conn: Conn) -> Response:
    """The schedule (a deleted one too: `deleted_at` says so); its version is the ETag."""
    return answer(await tenants.get(conn, schedule_id, tenant=caller.tenant))
