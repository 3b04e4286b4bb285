"""`/v1/schedules/{id}/...`: pause, resume, trigger and backfill a schedule, and read its
next fire times, a slot's explanation and its runs; each route one library call."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from fastapi.responses import JSONResponse
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field
from pydantic_core import to_jsonable_python as jsonable

from api.auth import Authorized
from api.deps import Conn
from api.routes.common import PROBLEMS, ScheduleId, answer, expected_version, schema
from api.routes.schedules import IfMatch
from schedules import tenants
from schedules.tenants import Requested
from schedules.tenants.model import MAX_NOTE

router = APIRouter(prefix="/v1/schedules/{schedule_id}", tags=["slots"], responses=PROBLEMS)
ONE = {200: schema("Schedule", "the schedule as it is now")}


class PauseRequest(BaseModel):
    """Why the schedule is paused (the change log and every listing show it)."""

    model_config = ConfigDict(extra="forbid")
    note: str = Field(min_length=1, max_length=MAX_NOTE)


class ResumeRequest(BaseModel):
    """Why the schedule is resumed, if said (kept in the change log's row of the resume,
    as a pause's note is in its own)."""

    model_config = ConfigDict(extra="forbid")
    note: str | None = Field(default=None, min_length=1, max_length=MAX_NOTE)


class BackfillRequest(BaseModel):
    """Past fire times in [start, end) to run again; `dry_run` lists them, records none."""

    model_config = ConfigDict(extra="forbid")
    start: AwareDatetime
    end: AwareDatetime
    dry_run: bool = False


@router.post("/pause", responses=ONE)
async def pause_schedule(
    schedule_id: ScheduleId,
    request: PauseRequest,
    caller: Authorized,
    conn: Conn,
    if_match: IfMatch = None,
) -> Response:
    """Pause the schedule, saying why; no slot of it is dispatched until it is resumed."""
    outcome = await tenants.pause(
        conn,
        schedule_id,
        request.note,
        by=caller.author,
        expected_version=expected_version(if_match, required=False),
        tenant=caller.tenant,
    )
    return answer(outcome.schedule)


@router.post("/resume", responses=ONE)
async def resume_schedule(
    schedule_id: ScheduleId,
    caller: Authorized,
    conn: Conn,
    request: ResumeRequest | None = None,
    if_match: IfMatch = None,
) -> Response:
    """Lift the pause, saying why if `note` is given (no body: no note); fire times that
    passed meanwhile do not run."""
    outcome = await tenants.resume(
        conn,
        schedule_id,
        note=None if request is None else request.note,
        by=caller.author,
        expected_version=expected_version(if_match, required=False),
        tenant=caller.tenant,
    )
    return answer(outcome.schedule)


def _requested(found: Requested) -> JSONResponse:
    return JSONResponse(
        {
            "schedule_id": found.schedule.id,
            "recorded": [jsonable(i.scheduled_at) for i in found.recorded],
            "already": jsonable(found.already),
            "would_run": jsonable(found.would_run),
            "workflow_ids": [i.workflow_id for i in found.recorded],
        },
        202 if found.recorded else 200,
    )


REQUESTED = {
    202: schema("Requested", "recorded: the dispatcher starts each slot's run"),
    200: schema("Requested", "nothing new recorded (a dry run, or recorded before)"),
}


@router.post("/trigger", responses=REQUESTED)
async def trigger_schedule(schedule_id: ScheduleId, caller: Authorized, conn: Conn) -> Response:
    """Run the schedule once now (slot: now, to the second), as a `manual` run, paused or
    not; the dispatcher's next tick starts it."""
    found = await tenants.trigger(conn, schedule_id, by=caller.author, tenant=caller.tenant)
    return _requested(found)


@router.post("/backfill", responses=REQUESTED)
async def backfill_schedule(
    schedule_id: ScheduleId, request: BackfillRequest, caller: Authorized, conn: Conn
) -> Response:
    """Run the fire times in [start, end) again (past ones only); a dry run lists the
    exact slots it would record (`would_run`) and those recorded before (`already`)."""
    found = await tenants.backfill(
        conn,
        schedule_id,
        request.start,
        request.end,
        dry_run=request.dry_run,
        by=caller.author,
        tenant=caller.tenant,
    )
    return _requested(found)


@router.get("/next", responses={200: schema("FireTimes", "the next fire times")})
async def next_fire_times(
    schedule_id: ScheduleId,
    caller: Authorized,
    conn: Conn,
    count: Annotated[int, Query(ge=1, le=1000)] = 10,
) -> Response:
    """The next `count` fire times, each with what a DST change or the business calendar
    does to it."""
    schedule, times = await tenants.next_times(conn, schedule_id, count, tenant=caller.tenant)
    fire_times = [{"at": jsonable(t.at), "dst": t.dst, "calendar": t.calendar} for t in times]
    return JSONResponse(
        {"schedule_id": schedule.id, "timezone": schedule.timezone, "fire_times": fire_times}
    )


@router.get("/explain", responses={200: schema("Explanation", "what is known of the slot")})
async def explain_slot(
    schedule_id: ScheduleId,
    slot: Annotated[AwareDatetime, Query(description="the slot, with its offset")],
    caller: Authorized,
    conn: Conn,
) -> Response:
    """Whether `slot` is a fire time of the schedule, whether a start was decided for it,
    what the ledger recorded, and the verdict in one line."""
    found = await tenants.explain(conn, schedule_id, slot, tenant=caller.tenant)
    return JSONResponse(
        {
            "schedule_id": found.schedule.id,
            "slot": jsonable(found.slot),
            "fire_time": found.fire_time,
            "workflow_id": found.workflow_id,
            "intent": jsonable(found.intent),
            "execution": jsonable(found.execution),
            "ran": found.ran,
            "verdict": found.verdict,
        }
    )


@router.get("/runs", responses={200: schema("Runs", "the ledger's rows, newest slot first")})
async def schedule_runs(
    schedule_id: ScheduleId,
    caller: Authorized,
    conn: Conn,
    limit: Annotated[int, Query(ge=1, le=1000)] = 20,
    before: Annotated[AwareDatetime | None, Query(description="only slots before")] = None,
) -> Response:
    """The schedule's runs (its `job_executions` rows), newest slot first."""
    rows: list[dict[str, Any]] = await tenants.runs(
        conn, schedule_id, limit=limit, before=before, tenant=caller.tenant
    )
    return JSONResponse({"schedule_id": schedule_id, "runs": jsonable(rows)})
