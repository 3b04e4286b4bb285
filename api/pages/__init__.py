"""The operator's dashboard: server-rendered pages under `/ui`, on the API's own app.

- `session.py`: who is signed in (a session cookie from an operator key, or a trusted
  proxy's header) and the CSRF token of every form that writes.
- `views.py`: the pages that read (the schedules list, one runtime schedule, a backfill's
  preview); `catalog.py`: the catalog's jobs in the list; `reads.py`: the few queries of
  the pages' own (`pages.sql`).
- `jobs.py`: a catalog job's page and its forms (pause, resume, trigger), each the
  library calls of `python -m schedules pause|resume|trigger`.
- `health.py`: `check`'s findings now and the newest recorded `audit` report, each
  linked to its schedule and slot, each run to the Temporal UI.
- `forms.py`: the forms that write, each one call of the library the CLI calls
  (`schedules.tenants`): pause, resume, trigger, backfill; and login, logout.
- `templates/`: the Jinja2 templates.

`install(app)` mounts them; the pages stay out of the OpenAPI document. docs/dashboard.md
describes them.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from api.pages import forms, health, jobs, views
from api.pages.render import render
from api.pages.session import CsrfRefused, NotSignedIn


def install(app: FastAPI) -> None:
    """Mount the pages and their two answers: to the login form, or a refused post."""
    app.include_router(views.router)
    app.include_router(health.router)
    app.include_router(forms.router)
    app.include_router(jobs.router)
    app.add_exception_handler(NotSignedIn, _to_login)
    app.add_exception_handler(CsrfRefused, _refused)


async def _to_login(request: Request, exc: Exception) -> RedirectResponse:
    return RedirectResponse("/ui/login", status_code=303)


async def _refused(request: Request, exc: Exception) -> HTMLResponse:
    return render(
        request,
        "refused.html",
        {"reason": "the form came without its CSRF token; nothing was changed"},
        status=403,
    )
