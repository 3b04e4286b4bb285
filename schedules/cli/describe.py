"""`python -m schedules describe JOB`: the catalog entry, server state and record of a job."""

from __future__ import annotations

import argparse
import sys

from schedules.cli import context as cli
from schedules.cli.format import describe_entry, format_describe
from schedules.record import DatabaseUnavailableError, execution_counts, recent_executions
from schedules.server.state import schedule_state

NAME = "describe"
HELP = "one job: catalog entry, server state, recent runs and executions"
DESCRIPTION = (
    "The job's catalog entry; its schedule on Temporal (paused and why, next runs - none "
    "while paused -, recent runs, counts, drift from the catalog); its record in "
    "PostgreSQL: how many runs completed, failed and were skipped, the newest success "
    "and failure, and the newest 10 executions."
)
EXIT_CODES = (
    "exit codes: 0 described; 1 Temporal unreachable, or PostgreSQL unreachable (the "
    f"catalog entry and server state are still shown); {cli.COMMON_EXIT}"
)


def configure(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = cli.command(subparsers, NAME, HELP, DESCRIPTION, EXIT_CODES)
    cli.add_job(parser)
    cli.add_json(parser)
    return parser


async def run(args: argparse.Namespace, ctx: cli.Context) -> int:
    job = cli.catalog_job(args, args.job)
    state = await schedule_state(await ctx.client(), job.id, retry=ctx.retry)
    executions, record, database_error = None, None, None
    url = cli.database_url(ctx)
    try:
        executions = await recent_executions(url, job.id)
        record = await execution_counts(url, job.id)
    except DatabaseUnavailableError as exc:
        database_error = str(exc)
    entry = describe_entry(job, state, executions, database_error, record)
    if args.json:
        cli.print_json(entry)
    else:
        print(format_describe(entry))
    if database_error:
        print(f"error: {database_error}; executions not shown", file=sys.stderr)
        return 1
    return 0
