"""`python -m schedules resume JOB`: lift a pause; the note goes back to the job's intent."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from core.text import printable
from schedules.catalog.compile import intent_note
from schedules.cli import context as cli
from schedules.cli.pause import EXIT_CODES
from schedules.cli.pauses import best_effort
from schedules.pauses import record_resume
from schedules.server.actions import resume
from schedules.server.state import usable_state

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
    state = await usable_state(client, job.id, retry=ctx.retry)
    if not state.paused:
        print(f"{job.id} is not paused; nothing changed")
        return 0
    # The note goes back to the job's intent, which the UI shows on the schedule's page.
    await resume(client, job.id, args.note or intent_note(job), retry=ctx.retry)
    at = datetime.now(UTC)  # after the server lifted it: the recorded interval is never narrow
    await best_effort(ctx, "resume", job.id, lambda url: record_resume(url, job.id, at))
    print(printable(f"resumed {job.id} (it was paused: {state.note or 'no note'})"))
    if job.paused:
        print(
            f"warning: the catalog pauses {job.id}; the next sync pauses it again",
            file=sys.stderr,
        )
    return 0
