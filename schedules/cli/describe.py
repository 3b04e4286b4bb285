"""`python -m schedules describe JOB`: the catalog entry, server state and record of a job."""

from __future__ import annotations

import argparse
import sys

from schedules.cli.context import (
    COMMON_EXIT,
    Context,
    add_job,
    add_json,
    catalog_job,
    command,
    database_url,
    print_json,
)
from schedules.cli.format import describe_entry, format_describe
from schedules.record import DatabaseUnavailableError, execution_counts, recent_executions
from schedules.server.state import schedule_state

NAME = "describe"
EXIT_CODES = (
    "exit codes: 0 described; 1 Temporal unreachable, or PostgreSQL unreachable (the "
    f"catalog entry and server state are still shown); {COMMON_EXIT}"
)


def configure(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = command(
        subparsers,
        NAME,
        "one job: catalog entry, server state, recent runs and executions",
        "The job's catalog entry; its schedule on Temporal (paused and why, next runs - none "
        "while paused -, recent runs, counts, drift from the catalog); its record in "
        "PostgreSQL: how many runs completed, failed and were skipped, the newest success "
        "and failure, and the newest 10 executions.",
        EXIT_CODES,
    )
    add_job(parser)
    add_json(parser)
    return parser


async def run(args: argparse.Namespace, ctx: Context) -> int:
    job = catalog_job(args.catalog, args.job)
    state = await schedule_state(await ctx.client(), job.id, retry=ctx.retry)
    executions, record, database_error = None, None, None
    url = database_url(ctx)
    try:
        executions = await recent_executions(url, job.id)
        record = await execution_counts(url, job.id)
    except DatabaseUnavailableError as exc:
        database_error = str(exc)
    entry = describe_entry(job, state, executions, database_error, record)
    if args.json:
        print_json(entry)
    else:
        print(format_describe(entry))
    if database_error:
        print(f"error: {database_error}; executions not shown", file=sys.stderr)
        return 1
    return 0
