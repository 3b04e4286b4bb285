"""The forms that write. Each checks the session's CSRF token before it reads anything
else, then makes the one library call the CLI makes (`schedules.tenants`: `python -m
schedules tenants pause|resume|trigger|backfill`), with the operator as its author. A
refusal of the library is shown as its one line; nothing is half-applied (each call is
one transaction)."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from api.deps import Conn
from api.pages.render import render
from api.pages.session import (
    LOGIN_COOKIE,
    Operator,
    check_csrf,
    check_login_token,
    login_token,
    operator,
    operator_key,
    start,
)
from api.pages.session import end as end_session
from api.pages.views import backfill_range
from core.errors import SchedulerError
from schedules import tenants

router = APIRouter(prefix="/ui", include_in_schema=False)
MAX_FORM = 16 * 1024


async def _form(request: Request) -> dict[str, str]:
    """The posted form (application/x-www-form-urlencoded), its last value of each field."""
    raw = await request.body()
    return dict(parse_qsl(raw[:MAX_FORM].decode("utf-8", "replace"), keep_blank_values=True))


async def _checked(request: Request, conn: Conn) -> tuple[Operator, dict[str, str]]:
    """The operator and the form, once its CSRF token is the session's."""
    who = await operator(request, conn)
    form = await _form(request)
    check_csrf(request, who, form)
    return who, form


def _refused(request: Request, reason: str, status: int = 422) -> HTMLResponse:
    return render(request, "refused.html", {"reason": reason}, status=status)


@router.get("/login", response_class=HTMLResponse)
async def login_page(request: Request, error: str = "") -> HTMLResponse:
    token = login_token(request)
    page = render(request, "login.html", {"csrf": token, "error": error})
    page.set_cookie(LOGIN_COOKIE, token, httponly=True, samesite="strict", path="/ui/login")
    return page


@router.post("/login")
async def login(request: Request, conn: Conn) -> Response:
    """An operator key in the form: the session starts. A tenant's key, a revoked or wrong
    one: the form again, saying only that the key is not an operator's."""
    form = await _form(request)
    check_login_token(request, form)
    key_id = await operator_key(conn, form.get("key", "").strip())
    if key_id is None:
        answer = render(
            request,
            "login.html",
            {"csrf": login_token(request), "error": "key: not a valid operator key"},
            status=401,
        )
        return answer
    answer = RedirectResponse("/ui/schedules", status_code=303)
    start(request, answer, key_id)
    return answer


@router.post("/logout")
async def logout(request: Request, conn: Conn) -> Response:
    await _checked(request, conn)
    answer = RedirectResponse("/ui/login", status_code=303)
    end_session(answer)
    return answer


def _back(schedule_id: int) -> RedirectResponse:
    return RedirectResponse(f"/ui/schedules/{schedule_id}", status_code=303)


@router.post("/schedules/{schedule_id}/pause")
async def pause(request: Request, conn: Conn, schedule_id: int) -> Response:
    who, form = await _checked(request, conn)
    try:
        await tenants.pause(conn, schedule_id, form.get("note", ""), by=who.author)
    except SchedulerError as exc:
        return _refused(request, str(exc))
    return _back(schedule_id)


@router.post("/schedules/{schedule_id}/resume")
async def resume(request: Request, conn: Conn, schedule_id: int) -> Response:
    who, form = await _checked(request, conn)
    note = form.get("note", "").strip() or None  # optional: why it is resumed
    try:
        await tenants.resume(conn, schedule_id, note=note, by=who.author)
    except SchedulerError as exc:
        return _refused(request, str(exc))
    return _back(schedule_id)


@router.post("/schedules/{schedule_id}/trigger")
async def trigger(request: Request, conn: Conn, schedule_id: int) -> Response:
    """A manual run now; the dispatcher's next tick starts it (as `tenants trigger`
    without a Temporal client)."""
    who, _ = await _checked(request, conn)
    try:
        await tenants.trigger(conn, schedule_id, by=who.author)
    except SchedulerError as exc:
        return _refused(request, str(exc))
    return _back(schedule_id)


@router.post("/schedules/{schedule_id}/backfill")
async def backfill(request: Request, conn: Conn, schedule_id: int) -> Response:
    """Record the range's slots (`tenants.backfill`), then the preview page again: it
    shows each slot's outcome, and says if what ran differs from what was previewed."""
    who, form = await _checked(request, conn)
    first, last = form.get("start", ""), form.get("end", "")
    try:
        schedule = await tenants.get(conn, schedule_id)
        begin, until = backfill_range(schedule, first, last)
        done = await tenants.backfill(conn, schedule_id, begin, until, by=who.author)
    except (ValueError, SchedulerError) as exc:
        return _refused(request, str(exc))
    query = {
        "start": first,
        "end": last,
        "recorded": len(done.recorded),
        "previewed": form.get("previewed", ""),
    }
    return RedirectResponse(
        f"/ui/schedules/{schedule_id}/backfill?{urlencode(query)}", status_code=303
    )
