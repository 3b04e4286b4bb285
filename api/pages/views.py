"""The pages that read: every runtime schedule (filtered), one schedule (its definition,
change history, runs, next fire times and `explain` of a chosen slot), and a backfill's
preview with each slot's outcome afterwards."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from api.deps import Conn
from api.pages.render import render
from api.pages.session import operator
from core.errors import SchedulerError
from core.sql import queries
from schedules import tenants
from schedules.catalog.times import parse_time
from schedules.tenants import store

router = APIRouter(prefix="/ui", include_in_schema=False)
Q = queries("api.pages", "pages")
STATES = ("active", "paused", "auto-paused", "failing", "late")
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


async def _last_runs(conn: Any, found: list[tenants.Schedule]) -> dict[str, dict[str, Any]]:
    rows = await _rows(conn, "last_runs", {"jobs": [s.ledger_name for s in found]})
    return {row["job_name"]: row for row in rows}


async def _rows(conn: Any, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    async with store.transaction(conn) as tx:
        cur = await tx.execute(Q[name], params)
        return await cur.fetchall()


@router.get("/schedules", response_class=HTMLResponse)
async def schedule_list(
    request: Request,
    conn: Conn,
    tenant: str = "",
    kind: str = "",
    state: str = "",
    after: int = 0,
) -> HTMLResponse:
    """Runtime schedules by id, a page at a time; tenant and kind filter in the query,
    the state among the page's schedules (its intent, next fires and last run)."""
    who = await operator(request, conn)
    now = datetime.now(UTC)
    paused = {"active": False, "failing": False, "late": False}.get(state)
    if state in ("paused", "auto-paused"):
        paused = True
    page = await tenants.list_schedules(
        conn, tenant=tenant or None, kind=kind or None, paused=paused, after=after, limit=PAGE
    )
    last = await _last_runs(conn, page.schedules)
    rows = []
    for schedule in page.schedules:
        run = last.get(schedule.ledger_name)
        found_state = _state(schedule, run, now)
        if state in STATES and found_state != state:
            continue
        fires = tenants.next_fire_times(schedule, max(now, schedule.timing_since), 3)
        rows.append({"s": schedule, "state": found_state, "last": run, "fires": fires})
    context = {
        "who": who,
        "rows": rows,
        "filters": {"tenant": tenant, "kind": kind, "state": state},
        "states": STATES,
        "next_after": page.next_after,
        "scanned": len(page.schedules),
    }
    return render(request, "schedules.html", context)


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
    ledger = {r["scheduled_at"]: r for r in await _rows(conn, "runs_among", params)}
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
