"""`python -m schedules runs JOB`: a job's executions, newest first, from `job_executions`.

Each: its slot in the job's time zone (and UTC), how it came about, status, attempt, how
long it took, its counts and its error. Read-only; PostgreSQL gets `--timeout` seconds.
"""

from __future__ import annotations

import argparse

from schedules.cli import context as cli
from schedules.cli.format import counts_text, execution_entry, table, when_text
from schedules.record import recent_executions

NAME = "runs"
HELP = "a job's executions, newest first: origin, status, attempt, duration, counts"
DESCRIPTION = (
    "List a job's executions from job_executions, newest first: the slot in "
    "the job's time zone and in UTC, how the run came about, its status, attempt, how "
    "long it took, its counts and its error. Read-only."
)
EXIT_CODES = (
    "exit codes: 0 listed; 1 PostgreSQL unreachable; 2 bad input (an unknown job, -n out of range)"
)


def format_runs(job_id: str, entries: list[dict], timezone: str) -> str:
    """The slot as every command shows a time: local with the zone's abbreviation
    (`2026-11-20 02:30 GMT`), then UTC."""
    if not entries:
        return f"{job_id}: no executions recorded"
    header = ("SCHEDULED", "UTC", "ORIGIN", "STATUS", "ATTEMPT", "TOOK", "COUNTS", "ERROR")
    rows = [
        (
            *when_text(e["scheduled_at"], timezone),
            e["origin"] or "-",
            e["status"],
            str(e["attempt"]),
            e["took"],
            counts_text(e["counts"]),
            (e["error"] or "")[:100],
        )
        for e in entries
    ]
    return "\n".join(table(header, rows))


def configure(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = cli.command(subparsers, NAME, HELP, DESCRIPTION, EXIT_CODES)
    parser.add_argument("job", help="the job id")
    parser.add_argument("--last", type=int, default=20, metavar="N", help="how many (default 20)")
    cli.add_json(parser)
    return parser


async def run(args: argparse.Namespace, ctx: cli.Context) -> int:
    job = cli.catalog_job(args, args.job)
    if not 1 <= args.last <= 10_000:
        raise cli.BadInputError(f"--last: must be between 1 and 10000, got {args.last}")
    rows = await recent_executions(cli.database_url(ctx), job.id, limit=args.last)
    entries = [execution_entry(row, job.timezone) for row in rows]
    if args.json:
        cli.print_json({"job": job.id, "executions": entries})
    else:
        print(format_runs(job.id, entries, job.timezone))
    return 0
