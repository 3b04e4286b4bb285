"""A catalog job's page, `/ui/jobs/{id}`: its intent and definition, its state on Temporal
(paused by whom and why), its next fire times, `explain` of a slot, its runs; and the
forms that pause (with a note), resume and trigger it.

Each form makes the library call `python -m schedules pause|resume|trigger` makes
(`schedules.operator_actions.pause_job` and `resume_job`: the schedule checked, the
action, its record for the audit; `schedules.trigger`), with the operator as its author;
each checks the session's CSRF token first.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from api.deps import Conn, temporal_client
from api.pages.catalog import catalog, fire_times, retry, server_states, temporal_problem
from api.pages.forms import _checked, _refused
from api.pages.render import render
from api.pages.session import operator
from core.errors import SchedulerError
from core.text import unprintable
from schedules import operator_actions, recent_executions, trigger
from schedules.catalog.model import JobSpec
from schedules.catalog.times import catalog_value, parse_time
from schedules.health.evidence import gather_evidence, paused_by
from schedules.health.explain import explain, format_verdict
from schedules.server.state import usable_state

router = APIRouter(prefix="/ui", include_in_schema=False)
START_TIMEOUT = 10.0  # as `python -m schedules trigger`: how long a run may take to start
MAX_NOTE = 1000


class UnknownJob(SchedulerError):
    """A job id the catalog does not have."""


def _job(request: Request, job_id: str) -> JobSpec:
    jobs = catalog(request).jobs
    if job_id not in jobs:
        raise UnknownJob(f"job: the catalog has no job {job_id[:80]!r}")
    return jobs[job_id]


def _database_url(request: Request) -> str:
    return request.app.state.settings.database_url.get_secret_value()


@router.get("/jobs/{job_id}", response_class=HTMLResponse)
async def job_page(request: Request, conn: Conn, job_id: str, slot: str = "") -> HTMLResponse:
    """One catalog job: intent, state, next ten fire times, `explain` of `slot` when
    given (as `python -m schedules explain JOB --at SLOT`), its 20 newest runs."""
    who = await operator(request, conn)
    try:
        job = _job(request, job_id)
    except UnknownJob as exc:
        return _refused(request, str(exc), status=404)
    now, url = datetime.now(UTC), _database_url(request)
    servers, server_error = await server_states(request, [job.id])
    server = servers.get(job.id)
    by = None
    if server is not None and server.usable and server.paused:
        by = await paused_by(url, job.id, catalog=job.paused)
    explained, error = None, None
    if slot:
        try:
            at = parse_time(slot, job.timezone, now)
        except ValueError as exc:
            error = f"slot: {exc}"
        else:
            evidence = await gather_evidence(
                lambda: temporal_client(request), url, job, at, now,
                task_queue=request.app.state.settings.temporal_task_queue, retry=retry(),
            )  # fmt: skip
            explained = format_verdict(evidence, explain(evidence))
    context = {
        "who": who,
        "job": job,
        "server": server,
        "server_error": server_error,
        "paused_by": by,
        "fires": fire_times(job, now, 10),
        "slot": slot,
        "explained": explained,
        "error": error,
        "runs": await recent_executions(url, job.id, limit=20),
        "definition": _definition(job),
    }
    return render(request, "job.html", context, status=422 if error else 200)


def _definition(job: JobSpec) -> dict[str, Any]:
    """The job's catalog entry as its file says it (durations as `15m`, instants in UTC)."""
    return {k: catalog_value(v) for k, v in job.model_dump(exclude_none=True).items()
            if k != "calendar_definition"}  # fmt: skip


def _back(job_id: str) -> RedirectResponse:
    return RedirectResponse(f"/ui/jobs/{job_id}", status_code=303)


def _note(text: str, required: bool) -> str | None:
    """The form's note, or `ValueError` naming what is wrong with it."""
    if required and not text.strip():
        raise ValueError("note: say why the job is paused, e.g. 'ledger migration'")
    if len(text) > MAX_NOTE:
        raise ValueError(f"note: must be at most {MAX_NOTE} characters, got {len(text)}")
    if unprintable(text) is not None:
        raise ValueError(f"note: must hold no control characters, got {text[:80]!r}")
    return text.strip() or None


async def _act(request: Request, conn: Conn, job_id: str, action: str) -> Response:
    """Check the form, then `action` on the job's schedule, as the CLI's command does."""
    who, form = await _checked(request, conn)
    try:
        job = _job(request, job_id)
        note = _note(form.get("note", ""), required=action == "pause")
        client = await temporal_client(request)
        url = _database_url(request)
        unrecorded = None
        if action == "pause":
            acted = await operator_actions.pause_job(
                client, job, note or "", who=who.author, conninfo=url, retry=retry()
            )
            unrecorded = acted.unrecorded
        elif action == "resume":
            acted = await operator_actions.resume_job(
                client, job, note, conninfo=url, retry=retry()
            )
            unrecorded = acted.unrecorded
        elif action == "trigger":
            await usable_state(client, job.id, retry=retry())
            now = datetime.now(UTC)
            await trigger(client, job.id, now, timeout=START_TIMEOUT, retry=retry())
        if unrecorded:
            reason = (
                f"the {action} is done on Temporal but not recorded in PostgreSQL ({unrecorded})"
            )
            return _refused(request, reason, status=500)
    except UnknownJob as exc:
        return _refused(request, str(exc), status=404)
    except (ValueError, SchedulerError) as exc:
        return _refused(request, str(exc))
    except (RuntimeError, TimeoutError) as exc:
        reason = f"{temporal_problem(request, exc)}; nothing was changed"
        return _refused(request, reason, status=503)
    return _back(job.id)


@router.post("/jobs/{job_id}/pause")
async def pause_job(request: Request, conn: Conn, job_id: str) -> Response:
    """`python -m schedules pause JOB --note NOTE --by <operator>`."""
    return await _act(request, conn, job_id, "pause")


@router.post("/jobs/{job_id}/resume")
async def resume_job(request: Request, conn: Conn, job_id: str) -> Response:
    """`python -m schedules resume JOB [--note NOTE]` (no note: the job's intent again)."""
    return await _act(request, conn, job_id, "resume")


@router.post("/jobs/{job_id}/trigger")
async def trigger_job(request: Request, conn: Conn, job_id: str) -> Response:
    """`python -m schedules trigger JOB`: one run now, overlap ALLOW_ALL, once started."""
    return await _act(request, conn, job_id, "trigger")
