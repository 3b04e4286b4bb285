"""`python -m schedules runs JOB`: a job's executions, newest first, from `job_executions`.

Each: its slot in the job's time zone (and UTC), how it came about, status, attempt, how
long it took, its counts and its error. Read-only; PostgreSQL gets `--timeout` seconds.
"""

from __future__ import annotations

import argparse
import json

from core.errors import SchedulerError
from schedules.cli import context as cli
from schedules.cli.context import Context
from schedules.cli.format import execution_entry
from schedules.server.state import recent_executions

EXIT_RUNS = (
    "exit codes: 0 listed; 1 PostgreSQL unreachable; 2 bad input (an unknown job, -n out of range)"
)


class RunsInputError(SchedulerError):
    """A job or count `runs` cannot use."""


def format_runs(job_id: str, entries: list[dict]) -> str:
    if not entries:
        return f"{job_id}: no executions recorded"
    header = ("SCHEDULED", "UTC", "ORIGIN", "STATUS", "ATTEMPT", "TOOK", "COUNTS", "ERROR")
    rows = [
        (
            e["scheduled_at"]["local"],
            e["scheduled_at"]["utc"],
            e["origin"] or "-",
            e["status"],
            str(e["attempt"]),
            e["took"],
            ", ".join(f"{k} {v}" for k, v in (e["counts"] or {}).items()) or "-",
            (e["error"] or "")[:100],
        )
        for e in entries
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    )


async def _runs(args: argparse.Namespace, ctx: Context) -> int:
    jobs = cli.catalog_jobs(args.catalog, args.job)
    if args.job not in jobs:
        raise RunsInputError(
            f"unknown job {args.job!r}; the catalog has: {', '.join(jobs) or 'no jobs'}"
        )
    if not 1 <= args.last <= 10_000:
        raise RunsInputError(f"--last: must be between 1 and 10000, got {args.last}")
    job = jobs[args.job]
    rows = await recent_executions(
        ctx.settings.database_url.get_secret_value(), job.id, limit=args.last
    )
    entries = [execution_entry(row, job.timezone) for row in rows]
    if args.json:
        print(json.dumps({"job": job.id, "executions": entries}, indent=2))
    else:
        print(format_runs(job.id, entries))
    return 0


def add(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "runs",
        help="a job's executions, newest first: origin, status, attempt, duration, counts",
        description="List a job's executions from job_executions, newest first: the slot in "
        "the job's time zone and in UTC, how the run came about, its status, attempt, how "
        "long it took, its counts and its error. Read-only.",
        epilog=EXIT_RUNS,
    )
    parser.add_argument("job", help="the job id")
    parser.add_argument("--last", type=int, default=20, metavar="N", help="how many (default 20)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.set_defaults(handler=_runs)


cli._EXTRA_COMMANDS.append(add)
