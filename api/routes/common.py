"""What the resource routes share: the schedule id in a path, the tenant a request acts
for, a schedule as its answer (with its version as the ETag), a JSON body read as the
library reads it."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import Path, Request, Response
from fastapi.responses import JSONResponse

from api.keys import Caller
from api.problems import Problem
from schedules.catalog.problems import short
from schedules.tenants import Schedule

MAX_ID = 2**63 - 1
ScheduleId = Annotated[int, Path(ge=1, le=MAX_ID, description="the schedule's id")]


def tenant_of(caller: Caller, given: Any) -> str | None:
    """The tenant a request acts for: a tenant key's own (a body naming another is
    refused), or what an operator's request names."""
    if caller.tenant is None:
        return given
    if given is not None and given != caller.tenant:
        raise Problem(
            422, f"tenant: this key acts for tenant {caller.tenant!r} only, got {given!r}"
        )
    return caller.tenant


def etag(schedule: Schedule) -> str:
    return f'"{schedule.version}"'


def answer(
    schedule: Schedule, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    """The schedule as the body (as stored: no validation again), its version as the
    ETag (an update's `If-Match`)."""
    body = schedule.model_dump(mode="json")
    return JSONResponse(body, status, headers={"ETag": etag(schedule), **(headers or {})})


def schema(component: str, description: str) -> dict[str, Any]:
    """An answer's OpenAPI entry: a JSON body of the `component` schema."""
    ref = {"$ref": f"#/components/schemas/{component}"}
    return {"description": description, "content": {"application/json": {"schema": ref}}}


async def json_object(request: Request) -> dict[str, Any]:
    """The request's body as a JSON object (the library validates its fields)."""
    raw = await request.body()
    try:
        value = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise Problem(400, f"body: is not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise Problem(422, f"body: must be a JSON object, got {type(value).__name__}")
    return value


def _problem(description: str) -> dict[str, Any]:
    ref = {"$ref": "#/components/schemas/Problem"}
    return {"description": description, "content": {"application/problem+json": {"schema": ref}}}


# The refusals every resource route may answer (api/problems.py says when).
PROBLEMS: dict[int | str, dict[str, Any]] = {
    400: _problem("the body is not valid JSON"),
    401: _problem("no key, a wrong key or a revoked key"),
    403: _problem("the tenant's quota refuses it"),
    404: _problem("no such schedule (or another tenant's)"),
    409: _problem("a create names an existing schedule with another definition"),
    412: _problem("If-Match names a version that is no longer the current one"),
    413: _problem("the body is over the size limit"),
    415: _problem("the body is not JSON"),
    422: _problem("a field is invalid: the detail names it and its value"),
    428: _problem("an update needs If-Match"),
    429: _problem("the key is over its rate limit (Retry-After)"),
    503: _problem("PostgreSQL does not answer"),
}


def expected_version(if_match: str | None, *, required: bool) -> int | None:
    """The version an `If-Match` names (`"3"`, `W/"3"`), None for `*` or none given (428
    when `required`)."""
    if if_match is None:
        if required:
            raise Problem(
                428,
                'If-Match: is required: send the ETag of the schedule you read (e.g. "3")',
                code="precondition-required",
            )
        return None
    text = if_match.strip()
    if text == "*":
        return None
    digits = text.removeprefix("W/").strip('"')
    if not digits.isdigit() or len(digits) > 18:
        raise Problem(422, f'If-Match: must be an ETag like "3", got {short(if_match)}')
    return int(digits)
