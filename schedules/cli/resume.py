"""`python -m schedules resume JOB`: lift a pause; the note goes back to the job's intent."""

from __future__ import annotations

import argparse
import sys

from core.text import printable
from schedules.cli import context as cli
from schedules.cli.pause import EXIT_CODES
from schedules.cli.pauses import warn_unrecorded
from schedules.operator_actions import resume_job

NAME = "resume"
HELP = "resume a paused job's schedule"
DESCRIPTION = (
    "Unpause the job's schedule. Runs missed while it was paused can be started with `backfill`."
)


def configure(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = cli.command(subparsers, NAME, HELP, DESCRIPTION, EXIT_CODES)
    cli.add_job(parser)
    parser.add_argument(
        "--note",
        default=None,
        type=cli.shown_text,
        metavar="TEXT",
        help="the note (default: the job's intent)",
    )
    cli.add_cluster_wait(parser)
    return parser


async def run(args: argparse.Namespace, ctx: cli.Context) -> int:
    job = cli.catalog_job(args, args.job)
    client = await ctx.client()
    # Without --note, the note goes back to the job's intent, which the UI shows.
    acted = await resume_job(
        client,
        job,
        args.note,
        conninfo=ctx.settings.database_url.get_secret_value(),
        retry=ctx.retry,
    )
    if not acted.changed:
        print(f"{job.id} is not paused; nothing changed")
        return 0
    if acted.unrecorded:
        warn_unrecorded("resume", job.id, acted.unrecorded, "cannot excuse its fire times")
    print(printable(f"resumed {job.id} (it was paused: {acted.before.note or 'no note'})"))
    if job.paused:
        print(
            f"warning: the catalog pauses {job.id}; the next sync pauses it again",
            file=sys.stderr,
        )
    return 0
