"""`python -m schedules list`: every job, its schedule, next run, last run and pause."""

from __future__ import annotations

import argparse
import sys

from schedules.cli import context as cli
from schedules.cli.format import format_list, list_entry
from schedules.record import DatabaseUnavailableError, last_runs
from schedules.server.state import schedule_states

NAME = "list"
HELP = "every job: schedule, next run, last run and its status, paused"
DESCRIPTION = (
    "One line per catalog job: its schedule and time zone, the next run (from Temporal) "
    "in local time and UTC, the last run and its status (from PostgreSQL), and whether "
    "it is paused and why. A paused job shows 'paused: NOTE' instead of a next run; "
    "jobs without a schedule on the server show 'not synced'."
)
EXIT_CODES = (
    "exit codes: 0 listed; 1 Temporal unreachable, or PostgreSQL unreachable (the "
    f"schedules are still listed, last runs shown as ?); {cli.COMMON_EXIT}"
)


def configure(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = cli.command(subparsers, NAME, HELP, DESCRIPTION, EXIT_CODES)
    cli.add_json(parser)
    return parser


async def run(args: argparse.Namespace, ctx: cli.Context) -> int:
    jobs = cli.catalog_jobs(args.catalog)
    # Connected first, like the other commands, so an unreachable Temporal fails once.
    states = await schedule_states(await ctx.client(), list(jobs), retry=ctx.retry)
    database_error = None
    try:
        runs = await last_runs(cli.database_url(ctx), list(jobs))
    except DatabaseUnavailableError as exc:
        runs, database_error = {}, str(exc)
    entries = [list_entry(job, states[job.id], runs.get(job.id)) for job in jobs.values()]
    if args.json:
        cli.print_json({"jobs": entries, "database_error": database_error})
    else:
        print(format_list(entries, database_ok=database_error is None))
    if database_error:
        print(f"error: {database_error}; last runs not shown", file=sys.stderr)
        return 1
    return 0
