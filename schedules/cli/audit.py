"""`python -m schedules audit`: judge the recorded history of the catalog's jobs.

Thin: arguments, settings and the exit codes; the checker is `schedules.audit`.
"""

from __future__ import annotations

import argparse
import logging
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from core import redact
from core.errors import SchedulerError, first_line
from schedules.audit import (
    DEFAULT_LATE,
    DEFAULT_OUTBOX_AGE,
    DEFAULT_PAGES_PER_SECOND,
    DEFAULT_SETTLE,
    run_audit,
)
from schedules.audit.format import render, utc
from schedules.audit.reports import record_report
from schedules.catalog.durations import format_duration
from schedules.catalog.model import load_catalog
from schedules.cli import context as cli
from schedules.notices import notify_findings

logger = logging.getLogger(__name__)

NAME = "audit"
HELP = "judge the recorded history: lost, duplicated, unexpected, stale slots..."
DESCRIPTION = (
    "Read the ledger, the commit journal, the outbox and Temporal's "
    "visibility for a window of scheduled times and print every finding, one line "
    "each with its kind, job, slot (UTC and the job's local time) and witnesses, then "
    "a summary line. Its fire times are computed independently of the engine's. "
    "It records the report (audit_reports: when, the window, the verdict, the "
    "findings), which the dashboard's health page shows, unless --no-record; it writes "
    "nothing else, unless --notify: then each lost or late slot not recorded before is "
    "recorded and its owner's notices queued (docs/notices.md)."
)
EXIT_AUDIT = (
    "exit codes: 0 no finding (inconclusive ones alone included); 1 at least one finding; "
    "2 could not read (bad arguments, an unknown job, an invalid catalog or settings, "
    "PostgreSQL or Temporal unreachable): one line, nothing else printed"
)
KINDS_HELP = """findings (docs/operating.md, Auditing the history):
  lost            a fire time due (older than --settle) with no ledger row
  late            a scheduled run claimed after the starting deadline or --late
  unexpected      a row that did work for a time that is not a fire time
  duplicated      one cause queued twice in the outbox, or a kind's domain effect twice
  stale_write     a commit under an attempt older than one that had taken the slot over
  orphan_effect   effects of an execution that ended failed; a kind's undone effect
                  the outside world kept (monthly-billing: a charge on a Void invoice)
  orphan_running  a row left running while its workflow run is closed or gone
  outcome_mismatch  a row completed whose run failed, was terminated or timed out; or a
                  row failed (or compensated) whose run completed
  missing_row     a closed run of the job's schedule with no row for its slot (a run of
                  a future slot, which does nothing by design, excepted)
  outbox_pending  a message pending longer than --outbox-age; outbox_dead: given up
  unstarted_intent  a runtime schedule's start decided longer than --settle ago that no
                  run took up
  dependency_unmet  a slot whose work started before the upstream slots mapped onto it
                  had completed (depends_on; a run anyway its policy allowed excepted)
  dropped_by_edit  a slot a timing edit stranded and dropped by the job's catch-up
                  policy (docs/calendars.md), until a backfill runs it
  inconclusive    cannot be told (a run past Temporal's retention; fire times of a
                  schedule paused now with no recorded pause); not counted in exit 1

Runtime schedules (schedules tenants) are judged too, each as the job rt-<id>, unless
--job names catalog jobs or --no-runtime is given.
"""
EPILOG = KINDS_HELP + "\n" + EXIT_AUDIT


class AuditInputError(SchedulerError):
    """An argument `audit` cannot use."""


_duration = cli.duration_type(allow_zero=True, example="a duration like '15m' or '0s'")


def _instant(text: str) -> datetime | timedelta:
    """An ISO 8601 time (UTC if it names no offset), or a duration: that long before now."""
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        try:
            return _duration(text)
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(
                f"must be an ISO 8601 time like '2027-03-14T00:00:00Z' or a duration ago "
                f"like '24h', got {text!r}"
            ) from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _rate(text: str) -> float:
    """A number of calls a second: above 0, at most 10,000."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not 0 < value <= 10_000:  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be above 0 and at most 10000, got {text!r}")
    return value


def _resolve(value: datetime | timedelta | None, now: datetime) -> datetime | None:
    return now - value if isinstance(value, timedelta) else value


def configure(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = cli.command(subparsers, NAME, HELP, DESCRIPTION, EPILOG, raw=True)
    parser.add_argument("--job", action="append", metavar="JOB", help="audit only JOB (repeat)")
    parser.add_argument(
        "--from",
        dest="start",
        type=_instant,
        metavar="T",
        help="first scheduled time (ISO 8601, or a duration ago; default 7d before --to)",
    )
    parser.add_argument(
        "--to", dest="end", type=_instant, metavar="T", help="end, exclusive (default now)"
    )
    parser.add_argument(
        "--settle",
        type=_duration,
        default=DEFAULT_SETTLE,
        metavar="DURATION",
        help="fire times younger than this are not judged yet (default 15m; 0s judges all)",
    )
    parser.add_argument(
        "--late",
        type=_duration,
        default=DEFAULT_LATE,
        metavar="DURATION",
        help="a scheduled run claimed later than this after its time (without a starting "
        "deadline) is late (default 5m)",
    )
    parser.add_argument(
        "--outbox-age",
        type=_duration,
        default=DEFAULT_OUTBOX_AGE,
        metavar="DURATION",
        help="an outbox message pending longer is reported (default 15m)",
    )
    parser.add_argument(
        "--pages-per-second",
        type=_rate,
        default=DEFAULT_PAGES_PER_SECOND,
        metavar="N",
        help="at most N calls a second to Temporal's visibility: listing pages (a job's "
        "runs are one page at least) and describes of runs in flight (default "
        f"{DEFAULT_PAGES_PER_SECOND:g}, to spare a shared server: a catalog of J jobs takes "
        "J/N seconds or more)",
    )
    parser.add_argument(
        "--no-runtime",
        dest="runtime",
        action="store_false",
        help="judge the catalog's jobs only, not the runtime schedules",
    )
    parser.add_argument(
        "--notify",
        action="store_true",
        help="record each lost or late slot found (once) and queue its owner's notices",
    )
    parser.add_argument(
        "--no-record",
        dest="record",
        action="store_false",
        help="do not record the report in audit_reports (the dashboard's health page shows "
        "the newest recorded one): read-only",
    )
    cli.add_json(parser, help="JSON Lines: one object a line")
    cli.add_timeout(
        parser,
        30.0,
        "give up on a read that has not answered within this long: exit 2 (default 30)",
    )
    return parser


async def run(args: argparse.Namespace, ctx: cli.Context) -> int:
    """The `audit` command: print the findings and the summary; its exit code."""
    try:
        return await _audit(args, ctx)
    except Exception as exc:  # exit 1 means "findings": a failure to read must not look so
        if getattr(args, "debug", False):
            raise
        logger.debug("audit failed", exc_info=True)
        what = "" if isinstance(exc, SchedulerError) else f"cannot read: {type(exc).__name__}: "
        print(f"error: {what}{redact.scrub(first_line(exc, ''))}", file=sys.stderr)
        return 2


async def _audit(args: argparse.Namespace, ctx: cli.Context) -> int:
    now = datetime.now(UTC)
    jobs = load_catalog(getattr(args, "catalog", None), engine=cli.with_engine(args))
    by_id = {job.id: job for job in jobs}
    for job_id in args.job or ():
        if job_id not in by_id:
            raise AuditInputError(
                f"--job: unknown job {job_id!r}; the catalog has: {', '.join(by_id)}"
            )
    chosen = [by_id[j] for j in dict.fromkeys(args.job)] if args.job else list(jobs)
    end = _resolve(args.end, now) or now
    start = _resolve(args.start, now)
    if start is not None and start >= end:
        raise AuditInputError(f"--from: {utc(start)} is not before --to {utc(end)}")
    client = await ctx.client()
    report = await run_audit(
        cli.database_url(ctx),
        client,
        chosen,
        task_queue=ctx.settings.temporal_task_queue,
        now=now,
        start=start,
        end=end,
        settle=args.settle,
        late=args.late,
        outbox_age=args.outbox_age,
        only_jobs=bool(args.job),
        timeout=args.timeout,
        pages_per_second=args.pages_per_second,
        runtime=args.runtime and not args.job,
        known=jobs,
    )
    zones = {j.id: j.timezone for j in jobs} | report.zones
    summary = facts(report, args.settle)
    print(render(report.findings, summary, zones, args.json))
    if args.record:
        await _record(cli.database_url(ctx), report, summary, zones)
    if args.notify:
        new = await notify_findings(cli.database_url(ctx), report.findings, by_id, args.timeout)
        print(f"notices: {new} new lost or late slot(s) recorded", file=sys.stderr)
    return report.exit_code


async def _record(url: str, report: Any, summary: dict[str, Any], zones: dict) -> None:
    """Record the report for the dashboard; a failure to is a warning, not the verdict's
    exit code (the findings are printed: they stand)."""
    try:
        await record_report(url, report, summary, zones, by="schedules audit")
    except (SchedulerError, psycopg.Error, OSError) as exc:
        logger.debug("recording the audit report failed", exc_info=True)
        print(
            f"warning: the report was not recorded ({redact.scrub(first_line(exc, ''))}): "
            "the dashboard's health page shows an older one",
            file=sys.stderr,
        )


def facts(report: Any, settle: timedelta) -> dict[str, Any]:
    return {
        "jobs": len(report.scopes),
        "fire_times": sum(s.due for s in report.scopes),
        "rows": report.rows,
        "runs": report.runs,
        "from": utc(report.window.start),
        "to": utc(report.window.end),
        "settle": format_duration(settle) if settle else "0s",
        "notes": {s.job.id: s.note for s in report.scopes if s.note},
    }
