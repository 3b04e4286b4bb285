"""`python -m schedules list`: every job, its schedule, next run, last run and pause."""

from __future__ import annotations

import argparse
import sys

from schedules.catalog.model import catalog_tables
from schedules.cli import context as cli
from schedules.cli.format import format_list, list_entry
from schedules.record import DatabaseUnavailableError, last_runs
from schedules.server.state import schedule_states
from schedules.sync.plan import managed_schedule_ids

NAME = "list"
HELP = "every job: schedule, next run, last run and its status, paused"
DESCRIPTION = (
    "One line per catalog job: its schedule and time zone, the next run (from Temporal) "
    "in local time and UTC, the last run and its status (from PostgreSQL), and whether "
    "it is paused and why. A paused job shows 'paused: NOTE' instead of a next run; "
    "jobs without a schedule on the server show 'not synced'. Schedules of this project "
    "on the server that the catalog does not have are named in a line under the table."
)
EXIT_CODES = (
    "exit codes: 0 listed; 1 Temporal unreachable, or PostgreSQL unreachable (the "
    f"schedules are still listed, last runs shown as ?); {cli.COMMON_EXIT}"
)


def not_in_catalog_text(others: list[str], shown: int = 10) -> str:
    """The line under the table naming the server's schedules of this project that the
    catalog does not have (another catalog's, or left over), rather than hiding them."""
    named = ", ".join(others[:shown]) + (
        f" and {len(others) - shown} more" if len(others) > shown else ""
    )
    return (
        f"the server also holds {len(others)} schedule(s) of this project that this catalog "
        f"does not have: {named} (another catalog's? pass it with --catalog; a sync of this "
        "one deletes them)"
    )


def configure(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = cli.command(subparsers, NAME, HELP, DESCRIPTION, EXIT_CODES)
    cli.add_json(parser)
    return parser


async def run(args: argparse.Namespace, ctx: cli.Context) -> int:
    jobs = cli.catalog_jobs(args)
    # Connected first, like the other commands, so an unreachable Temporal fails once.
    client = await ctx.client()
    states = await schedule_states(client, list(jobs), retry=ctx.retry)
    # An invalid entry left out (warned about above) is the catalog's all the same.
    known = set(catalog_tables(args.catalog, engine=cli.with_engine(args)))
    others = sorted(set(await ctx.retrying(lambda: managed_schedule_ids(client))) - known)
    database_error = None
    try:
        runs = await last_runs(cli.database_url(ctx), list(jobs))
    except DatabaseUnavailableError as exc:
        runs, database_error = {}, str(exc)
    entries = [list_entry(job, states[job.id], runs.get(job.id)) for job in jobs.values()]
    if args.json:
        cli.print_json(
            {"jobs": entries, "not_in_catalog": others, "database_error": database_error}
        )
    else:
        print(format_list(entries, database_ok=database_error is None))
        if others:
            print(not_in_catalog_text(others))
    if database_error:
        print(f"error: {database_error}; last runs not shown", file=sys.stderr)
        return 1
    return 0
