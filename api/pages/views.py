"""The pages that read: every catalog job and runtime schedule (filtered), one runtime
schedule (its definition, change history, runs, next fire times and `explain` of a chosen
slot), and a backfill's preview with each slot's outcome afterwards. A catalog job's page
is `jobs.py`."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from api.deps import Conn
from api.pages.catalog import catalog, catalog_rows, listing
from api.pages.reads import last_runs, rows
from api.pages.render import render
from api.pages.session import operator
from core.errors import SchedulerError
from schedules import tenants
from schedules.catalog.times import parse_time

router = APIRouter(prefix="/ui", include_in_schema=False)
STATES = ("active", "paused", "auto-paused", "failing", "late")
SOURCES = ("catalog", "runtime")
LATE_AFTER = timedelta(minutes=1)  # due this long ago and not dispatched: late
PAGE = 100


@router.get("")
async def home() -> RedirectResponse:
    return RedirectResponse("/ui/schedules", status_code=303)


def _state(schedule: tenants.Schedule, last: dict[str, Any] | None, now: datetime) -> str:
    if schedule.paused:
        return "auto-paused" if schedule.paused_by == "auto" else "paused"
    if last is not None and last["status"] == "failed":
        return "failing"
    if schedule.next_fire_at is not None and schedule.next_fire_at < now - LATE_AFTER:
        return "late"
    return "active"


@router.get("/schedules", response_class=HTMLResponse)
async def schedule_list(
    request: Request,
    conn: Conn,
    tenant: str = "",
    source: str = "",
    kind: str = "",
    state: str = "",
    after: int = 0,
) -> HTMLResponse:
    """The catalog's jobs (on the first page; they have no tenant), then the runtime
    schedules by id, a page at a time: tenant and kind filter in the query, the state
    among the page's schedules (its intent, next fires and last run)."""
    who = await operator(request, conn)
    now = datetime.now(UTC)
    state = state if state in STATES else ""
    # Temporal's listing of the catalog's schedules, asked while PostgreSQL is read.
    asked = None
    if source != "runtime" and not tenant and not after:
        asked = asyncio.create_task(listing(request, kind))
    try:
        found, next_after, scanned = [], None, 0
        if source != "catalog":
            found, next_after, scanned = await _runtime_rows(conn, tenant, kind, state, after, now)
        listed = await asked if asked is not None else None
    finally:
        if asked is not None:
            asked.cancel()  # a no-op once it is done
    jobs = await catalog_rows(conn, listed, state, now) if listed is not None else []
    context = {
        "who": who,
        "jobs": jobs,
        "temporal_error": listed.error if listed is not None else None,
        "invalid": catalog(request).invalid,
        "rows": found,
        "filters": {"tenant": tenant, "source": source, "kind": kind, "state": state},
        "states": STATES,
        "sources": SOURCES,
        "next_after": next_after,
        "scanned": scanned,
    }
    return render(request, "schedules.html", context)


async def _runtime_rows(
    conn: Any, tenant: str, kind: str, state: str, after: int, now: datetime
) -> tuple[list[dict[str, Any]], int | None, int]:
    """A page of runtime schedules (those in `state` among them), the id to page on
    after, and how many were read."""
    paused = {"active": False, "failing": False, "late": False}.get(state)
    if state in ("paused", "auto-paused"):
        paused = True
    page = await tenants.list_schedules(
        conn, tenant=tenant or None, kind=kind or None, paused=paused, after=after, limit=PAGE
    )
    last = await last_runs(conn, [s.ledger_name for s in page.schedules])
    found = []
    for schedule in page.schedules:  # fire times only for the rows shown
        run = last.get(schedule.ledger_name)
        judged = _state(schedule, run, now)
        if state and judged != state:
            continue
        fires = tenants.next_fire_times(schedule, max(now, schedule.timing_since), 3)
        found.append({"s": schedule, "state": judged, "last": run, "fires": fires})
    return found, page.next_after, len(page.schedules)


@router.get("/schedules/{schedule_id}", response_class=HTMLResponse)
async def schedule_page(
    request: Request, conn: Conn, schedule_id: int, slot: str = ""
) -> HTMLResponse:
    """One schedule: definition, next fire times (DST and calendar notes), `explain` of
    `slot` when given, runs, change history, and the forms that pause, resume, trigger."""
    who = await operator(request, conn)
    schedule, fires = await tenants.next_times(conn, schedule_id, 10)
    explained, error = None, None
    if slot:
        try:
            at = parse_time(slot, schedule.timezone, datetime.now(UTC))
            explained = await tenants.explain(conn, schedule_id, at)
        except (ValueError, SchedulerError) as exc:
            error = f"slot: {exc}"
    context = {
        "who": who,
        "s": schedule,
        "fires": fires,
        "slot": slot,
        "explained": explained,
        "error": error,
        "runs": await tenants.runs(conn, schedule_id, limit=20),
        "changes": await tenants.changes(conn, schedule_id, limit=20),
    }
    return render(request, "schedule.html", context, status=422 if error else 200)


@router.get("/schedules/{schedule_id}/backfill", response_class=HTMLResponse)
async def backfill_page(
    request: Request,
    conn: Conn,
    schedule_id: int,
    start: str = "",
    end: str = "",
    recorded: int | None = None,
    previewed: str = "",
) -> HTMLResponse:
    """A backfill's preview (`tenants.backfill(dry_run=True)`): every slot it will run,
    every one recorded before (a no-op), or why the range is refused; and each slot's
    outcome in the ledger."""
    who = await operator(request, conn)
    schedule = await tenants.get(conn, schedule_id)
    context: dict[str, Any] = {"who": who, "s": schedule, "start": start, "end": end}
    context |= {"recorded": recorded, "previewed": previewed}
    if start and end:
        try:
            context["preview"] = await preview(conn, schedule, start, end)
        except (ValueError, SchedulerError) as exc:
            context["refused"] = str(exc)
    status = 422 if "refused" in context else 200
    return render(request, "backfill.html", context, status=status)


async def preview(conn: Any, schedule: tenants.Schedule, start: str, end: str) -> dict[str, Any]:
    """What a backfill of [start, end) does now, and each of its slots' ledger row."""
    begin, until = backfill_range(schedule, start, end)
    dry = await tenants.backfill(conn, schedule.id, begin, until, dry_run=True)
    slots = sorted([*dry.would_run, *dry.already])
    params = {"job": schedule.ledger_name, "slots": slots}
    ledger = {r["scheduled_at"]: r for r in await rows(conn, "runs_among", params)}
    return {"begin": begin, "until": until, "would_run": dry.would_run, "already": dry.already,
            "slots": slots, "ledger": ledger}  # fmt: skip


def backfill_range(schedule: tenants.Schedule, start: str, end: str) -> tuple[datetime, datetime]:
    """The range's ends as the CLI reads them: in the schedule's zone unless an offset."""
    now = datetime.now(UTC)
    try:
        begin = parse_time(start, schedule.timezone, now)
    except ValueError as exc:
        raise ValueError(f"start: {exc}") from None
    try:
        until = parse_time(end, schedule.timezone, now)
    except ValueError as exc:
        raise ValueError(f"end: {exc}") from None
    return begin, until
