"""`python -m schedules check`: the health of every job, as a table or JSON, with probe exit codes."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import textwrap
from datetime import UTC, datetime
from typing import Any

from core import redact
from core.errors import SchedulerError
from schedules.catalog.durations import format_duration
from schedules.catalog.model import load_valid_jobs
from schedules.cli import context as cli
from schedules.cli.format import table
from schedules.health.check_run import run_check
from schedules.health.status import (
    DEFAULT_LOOKBACK,
    HISTORY,
    SLOW_FACTOR,
    CheckReport,
    Execution,
    Kind,
)
from worker.client import connect
from worker.settings import load_settings

logger = logging.getLogger(__name__)

NAME = "check"
HELP = "report each job's last run, last success and next due time, with alerts"
DESCRIPTION = (
    "For every job in the catalog: last run, last success and next due time\n"
    "(from its Temporal schedule), and an alert for each problem below. Read-only."
)
EXIT_CODES = (
    "exit codes: 0 healthy; 1 at least one alert; 2 cannot tell (PostgreSQL or Temporal "
    "unreachable, invalid settings, an unreadable catalog, or an invalid catalog entry: the "
    "other jobs are still checked and reported). Fit for a Kubernetes CronJob or a "
    "Nagios-style probe."
)

_ALERTS = (
    (Kind.NOT_COMPLETED, "the latest due fire time has no completed or skipped run"),
    ("", "(due: fire time + jitter + median run time + alert_grace, 15m by default)"),
    (Kind.LAST_RUN_FAILED, "the latest finished run failed"),
    (Kind.MISSED_RUNS, "fire times in the lookback have no execution row at all"),
    (Kind.CATCHUP_GAP, "missed fire times were dropped beyond the job's catch-up cap"),
    (
        Kind.SLOW_RUN,
        f"the latest run took over {SLOW_FACTOR:g} x the median of the {HISTORY} before it",
    ),
    (Kind.BACKFILL_SKIPPED, "slots of a backfill the server skipped (overlap) and never ran"),
    (Kind.DEPENDENCY_OVERDUE, "a run still waits for its upstream slots past its deadline"),
    (Kind.DEAD_OUTBOX, "outbox messages the relay gave up on"),
    (Kind.SCHEDULE_NOT_REGISTERED, "no Temporal schedule managed by this project for the job"),
)
ALERTS_HELP = "alerts (see docs/observability.md, Checking health and alerts):\n" + "\n".join(
    f"  {kind:<24} {text}" for kind, text in _ALERTS
)
EPILOG = ALERTS_HELP + "\n\n" + textwrap.fill(EXIT_CODES, 79)


def configure(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = cli.command(subparsers, NAME, HELP, DESCRIPTION, EPILOG, raw=True)
    cli.add_json(parser)
    parser.add_argument(
        "--lookback",
        type=cli.duration_type(allow_zero=False, example="a positive duration like '24h'"),
        default=DEFAULT_LOOKBACK,
        metavar="DURATION",
        help="how far back to look for missed runs and catch-up gaps (default 24h)",
    )
    cli.add_timeout(
        parser,
        cli.FAIL_FAST_SECONDS,
        "give up on PostgreSQL, or on a call to Temporal, that has not answered "
        "within this long: exit 2 "
        f"(default {cli.FAIL_FAST_SECONDS:g})",
    )
    return parser


async def run(args: argparse.Namespace, ctx: cli.Context | None = None) -> int:
    """The `check` command: print the report and return its exit code (never 1 on a crash)."""
    try:
        settings = load_settings()
        # A colleague's broken entry must not blind the check to every other job: those
        # are checked, and the entry is an error (status unknown, exit 2).
        jobs, broken = load_valid_jobs(getattr(args, "catalog", None), engine=cli.with_engine(args))
        report = await run_check(
            lambda: connect(settings),
            settings.database_url.get_secret_value(),
            jobs,
            datetime.now(UTC),
            lookback=args.lookback,
            timeout=args.timeout,
            address=settings.temporal_address,
        )
        report.errors += [
            f"{problems[0]}: invalid catalog entry, not checked (`python -m schedules "
            "validate` lists every problem)"
            for problems in broken.values()
        ]
    except SchedulerError as exc:  # bad settings or an unreadable catalog: cannot tell
        print(f"error: {redact.scrub(str(exc))}", file=sys.stderr)
        return 2
    except Exception as exc:  # exit 1 means "alert": a crash must not look like one
        if getattr(args, "debug", False):
            raise
        logger.debug("check failed", exc_info=True)
        print(
            f"error: the check itself failed: {type(exc).__name__}: {redact.scrub(str(exc))}",
            file=sys.stderr,
        )
        return 2
    print(json.dumps(to_json(report), indent=2) if args.json else format_report(report))
    return report.exit_code


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z") if value else None


def _run_json(run: Execution | None) -> dict[str, Any] | None:
    if run is None:
        return None
    return {
        "scheduled_at": _iso(run.scheduled_at),
        "status": run.status,
        "attempt": run.attempt,
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
        "duration_seconds": run.duration.total_seconds() if run.duration else None,
        "error": run.error,
    }


def to_json(report: CheckReport) -> dict[str, Any]:
    """The report as JSON-ready data; `alerts` lists every alert with its kind and job."""

    def alert(a) -> dict[str, str]:
        return {"kind": str(a.kind), "job": a.job, "message": a.message}

    return {
        "status": report.status,
        "checked_at": _iso(report.checked_at),
        "alerts": [alert(a) for a in report.alerts],
        "errors": report.errors,
        "jobs": [
            {
                "job": job.job,
                "schedule": job.schedule,
                "timezone": job.timezone,
                "state": job.state,
                "last_run": _run_json(job.last_run),
                "last_success": _run_json(job.last_success),
                "next_due": _iso(job.next_due),
                "next_due_source": job.next_due_source,
                "alerts": [alert(a) for a in job.alerts],
            }
            for job in report.jobs
        ],
        "outbox": None
        if report.outbox is None
        else {
            "dead": report.outbox.dead,
            "oldest_dead_at": _iso(report.outbox.oldest_dead_at),
        },
    }


def _short(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%MZ") if value else "-"


def _run_text(run: Execution | None) -> str:
    if run is None:
        return "-"
    took = f" {format_duration(run.duration)}" if run.duration else ""
    return f"{_short(run.scheduled_at)} {run.status}{took}"


def format_report(report: CheckReport) -> str:
    """A table of the jobs, then one line per alert and per error, then the status."""
    header = ("job", "state", "last run", "last success", "next due")
    rows = [
        (
            job.job,
            job.state,
            _run_text(job.last_run),
            _short(job.last_success.scheduled_at) if job.last_success else "-",
            _short(job.next_due),
        )
        for job in report.jobs
    ]
    lines = table(header, rows)
    if report.outbox is not None:
        lines.append(f"outbox: {report.outbox.dead} dead message(s)")
    lines.append("")
    kind_width = max((len(a.kind) for a in report.alerts), default=0)
    job_width = max((len(a.job) for a in report.alerts), default=0)
    lines += [
        f"ALERT  {a.job.ljust(job_width)}  {a.kind.ljust(kind_width)}  {a.message}"
        for a in report.alerts
    ]
    lines += [f"ERROR  {e}" for e in report.errors]
    counted = f" ({len(report.alerts)} alert(s))" if report.alerts else ""
    lines.append(f"status: {report.status}{counted} at {_short(report.checked_at)}")
    return "\n".join(lines)
