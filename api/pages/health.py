"""The health page: `check`'s findings now and the newest recorded `audit` report
(`schedules audit` records each; `schedules.audit.reports`).

Each finding links to its schedule: a runtime schedule's or a catalog job's page here
(for a slot, that page's `explain` of the slot); each run links to its page in the Temporal Web UI (`TEMPORAL_UI_URL`). Read-only: `check` reads
PostgreSQL and Temporal as `python -m schedules check` does (`run_check`, the same call),
through the app's Temporal client (`api.deps.temporal_client`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from api.deps import Conn, Settings, temporal_client
from api.pages.render import render
from api.pages.session import operator
from api.settings import ApiSettings
from core import redact
from core.errors import SchedulerError
from schedules.audit.reports import latest_report
from schedules.catalog.model import load_valid_jobs
from schedules.health.check_run import run_check
from schedules.health.status import CheckReport

router = APIRouter(prefix="/ui", include_in_schema=False)
CHECK_TIMEOUT = 10.0  # seconds: PostgreSQL, connecting to Temporal, each call to it
RUNTIME_JOB = re.compile(r"rt-(\d+)")
# A check alert about runtime schedules of a kind: the list's state that shows them.
STATE_OF_ALERT = {"last_run_failed": "failing", "auto_paused": "auto-paused", "missed_runs": "late"}


@dataclass(frozen=True)
class Links:
    """Where a finding's schedule, slot and runs are shown: here, or in the Temporal UI."""

    ui: str
    namespace: str

    @classmethod
    def of(cls, settings: ApiSettings) -> Links:
        return cls(settings.temporal_ui_url.rstrip("/"), settings.temporal_namespace)

    def _temporal(self, path: str) -> str:
        return f"{self.ui}/namespaces/{quote(self.namespace, safe='')}/{path}"

    def schedule(self, job: str | None, kind: str = "") -> str | None:
        """A job's schedule: a runtime schedule's page, the list of a kind's or a tenant's
        runtime schedules, or a catalog job's page here."""
        if not job or job == "outbox":
            return None
        if found := RUNTIME_JOB.fullmatch(job):
            return f"/ui/schedules/{found[1]}"
        if job.startswith("runtime:"):
            query = {"kind": job.removeprefix("runtime:"), "state": STATE_OF_ALERT.get(kind, "")}
            return "/ui/schedules?" + urlencode(query)
        if job.startswith("tenant:"):
            return "/ui/schedules?" + urlencode({"tenant": job.removeprefix("tenant:")})
        return f"/ui/jobs/{quote(job, safe='')}"

    def slot(self, job: str | None, slot: str | None) -> str | None:
        """A slot (UTC, ISO 8601): its schedule's page with its `explain` (a runtime
        schedule's or a catalog job's, as `python -m schedules explain JOB --at SLOT`)."""
        if not job or not slot:
            return None
        if found := RUNTIME_JOB.fullmatch(job):
            return f"/ui/schedules/{found[1]}?" + urlencode({"slot": slot})
        return f"/ui/jobs/{quote(job, safe='')}?" + urlencode({"slot": slot})

    def run(self, workflow_id: str, run_id: str | None = None) -> str:
        """A run's page in the Temporal UI (the newest run of the id if no run id)."""
        if run_id:
            return self._temporal(f"workflows/{quote(workflow_id, safe='')}/{run_id}/history")
        query = urlencode({"query": f'WorkflowId="{workflow_id}"'})
        return self._temporal(f"workflows?{query}")


@router.get("/health", response_class=HTMLResponse)
async def health_page(request: Request, conn: Conn, settings: Settings) -> HTMLResponse:
    """`check` now (its alerts, the catalog's jobs) and the newest audit report."""
    who = await operator(request, conn)
    context: dict[str, Any] = {
        "who": who,
        "links": Links.of(settings),
        "audit": await latest_report(conn),
    }
    try:
        context["check"] = await _check(request, settings)
    except SchedulerError as exc:  # settings or a catalog file that cannot be read
        context["check_error"] = redact.scrub(str(exc))
    return render(request, "health.html", context)


async def _check(request: Request, settings: ApiSettings) -> CheckReport:
    """`python -m schedules check`'s report, by the same call (`run_check`)."""
    jobs, broken = load_valid_jobs(settings.schedules_catalog)
    report = await run_check(
        lambda: temporal_client(request),
        settings.database_url.get_secret_value(),
        jobs,
        datetime.now(UTC),
        timeout=CHECK_TIMEOUT,
        address=settings.temporal_address,
    )
    report.errors += [
        f"{problems[0]}: invalid catalog entry, not checked" for problems in broken.values()
    ]
    return report
