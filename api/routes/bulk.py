"""A tenant's schedules at once: apply a desired set (`PUT /v1/schedules`) and export
them (`GET /v1/export`, JSON Lines that `schedules tenants import` reads)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

from api.auth import Authorized
from api.deps import Conn, Pool, Settings
from api.problems import Problem
from api.routes.common import PROBLEMS, json_object, schema, tenant_of
from api.schemas import body
from schedules import tenants
from schedules.tenants import Quotas
from schedules.tenants.api import searched

router = APIRouter(prefix="/v1", tags=["bulk"], responses=PROBLEMS)
TENANT = Annotated[str | None, Query(description="operator keys: the tenant")]
JSON_LINES = "application/x-ndjson"


@router.put(
    "/schedules",
    openapi_extra=body("DesiredSet"),
    responses={200: schema("ApplyReport", "what was (or, a dry run, would be) changed")},
)
async def apply_schedules(
    request: Request, caller: Authorized, conn: Conn, settings: Settings, tenant: TENANT = None
) -> Response:
    """Make the tenant's live schedules exactly `schedules`: create, update and delete by
    name, in one transaction; `dry_run` reports and writes nothing."""
    data = await json_object(request)
    owner = tenant_of(caller, tenant)
    if owner is None:
        raise Problem(422, "tenant: is required with an operator's key")
    unknown = sorted(set(data) - {"schedules", "dry_run"})
    if unknown:
        raise Problem(422, f"{unknown[0]}: is not a field of a desired set (schedules, dry_run)")
    desired, dry_run = data.get("schedules"), data.get("dry_run", False)
    if not isinstance(desired, list) or not all(isinstance(d, dict) for d in desired):
        raise Problem(422, "schedules: must be a list of schedule objects")
    if not isinstance(dry_run, bool):
        raise Problem(422, f"dry_run: must be true or false, got {dry_run!r}")
    desired = [{**d, "tenant": tenant_of(caller, d.get("tenant", owner))} for d in desired]
    report = await tenants.apply(
        conn, owner, desired, by=caller.author, dry_run=dry_run, quotas=Quotas.of(settings)
    )
    return JSONResponse(asdict(report))


@router.get(
    "/export",
    responses={
        200: {
            "description": "one schedule definition per line, by id",
            "content": {JSON_LINES: {"schema": {"type": "string"}}},
        }
    },
)
async def export_schedules(caller: Authorized, pool: Pool, tenant: TENANT = None) -> Response:
    """The tenant's live schedules (an operator's key: every tenant's, or `tenant`'s) as
    JSON Lines, the format `python -m schedules tenants import` reads."""
    owner = searched("tenant", tenant_of(caller, tenant))  # refused before the stream starts

    async def lines() -> AsyncIterator[str]:
        # Its own connection: the stream outlives the request's dependencies.
        async with pool.connection() as conn, aclosing(tenants.export(conn, tenant=owner)) as rows:
            async for row in rows:
                yield json.dumps(row, separators=(",", ":")) + "\n"

    return StreamingResponse(lines(), media_type=JSON_LINES)
