"""Templates to HTML: one Jinja2 environment (autoescaped) over `templates/`, and the
filters the pages share (an instant in a zone's local time and in UTC)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, select_autoescape

from api.pages.session import session_secret
from schedules.catalog.durations import format_duration
from schedules.catalog.times import local_text, utc_text

_ENV = Environment(
    loader=PackageLoader("api.pages", "templates"),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
    auto_reload=False,  # packaged templates: no stat of each file per page (a row's include)
)


def _local(instant: datetime | None, timezone: str) -> str:
    return "" if instant is None else local_text(instant, timezone)


def _utc(instant: datetime | None) -> str:
    return "" if instant is None else utc_text(instant)


_ENV.filters["local"] = _local
_ENV.filters["utc"] = _utc
_ENV.filters["duration"] = format_duration


def render(
    request: Request, template: str, context: dict[str, Any], status: int = 200
) -> HTMLResponse:
    """The page `template` over `context` (plus the request), as an HTML answer."""
    who = context.get("who")
    if who is not None:  # the header's logout form, and every form that writes
        context.setdefault("csrf", who.csrf(session_secret(request)))
    html = _ENV.get_template(template).render(request=request, **context)
    return HTMLResponse(html, status_code=status, headers={"Cache-Control": "no-store"})
