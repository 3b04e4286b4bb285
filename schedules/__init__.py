"""Durable scheduled jobs on Temporal: the catalog, its sync to Temporal schedules, and the
operator's view of them, as a Python library (`python -m schedules` is a thin CLI on top).

Every function that talks to a server takes a `temporalio.client.Client` (made with the
pydantic data converter, as `worker.client.connect` does) or a PostgreSQL connection
string, never the CLI's state. Calls to Temporal take an optional `retry=Retry(...)`: by
default a transient error is retried for 5 seconds, then raised as
`TemporalUnreachableError`. See docs/python-api.md.

The modules behind these names are private to the package's layout (`schedules.catalog`,
`schedules.sync`, `schedules.server`, `schedules.health`, `schedules.record`); import from
here.
"""

from __future__ import annotations

from schedules.audit import AuditReport, run_audit
from schedules.audit.reports import StoredAudit, latest_report, record_report
from schedules.backfills import Backfilled, backfill
from schedules.catalog.model import JobSpec, load_catalog, parse_catalog
from schedules.compat import RETIRED, Retired, open_retired_runs
from schedules.health.check_run import run_check
from schedules.health.evidence import gather_evidence
from schedules.health.explain import Evidence, explain
from schedules.health.status import CheckReport
from schedules.health.verify import verify_jobs
from schedules.record import DatabaseUnavailableError, last_runs, recent_executions
from schedules.server.actions import pause, resume, trigger
from schedules.server.retry import Retry
from schedules.server.runs import RunOutcome, wait_for_run
from schedules.server.state import OperationError, ServerState, schedule_state, usable_state

# Named apart from the `schedules.sync` package, which a plain `sync` would hide.
from schedules.sync.apply import sync as apply_sync
from schedules.sync.plan import compile_jobs
from schedules.sync.plan import plan as plan_sync
from schedules.sync.report import Change, SyncReport, format_report

__all__ = [
    "RETIRED",
    "AuditReport",
    "Backfilled",
    "Change",
    "CheckReport",
    "DatabaseUnavailableError",
    "Evidence",
    "JobSpec",
    "OperationError",
    "Retired",
    "Retry",
    "RunOutcome",
    "ServerState",
    "StoredAudit",
    "SyncReport",
    "apply_sync",
    "backfill",
    "compile_jobs",
    "explain",
    "format_report",
    "gather_evidence",
    "last_runs",
    "latest_report",
    "load_catalog",
    "open_retired_runs",
    "parse_catalog",
    "pause",
    "plan_sync",
    "recent_executions",
    "record_report",
    "resume",
    "run_audit",
    "run_check",
    "schedule_state",
    "trigger",
    "usable_state",
    "verify_jobs",
    "wait_for_run",
]
