"""`python -m schedules pause JOB --note TEXT`: pause a job's schedule, saying why."""

from __future__ import annotations

import argparse

from schedules.cli.context import (
    COMMON_EXIT,
    BadInputError,
    Context,
    add_cluster_wait,
    add_job,
    catalog_job,
    command,
)
from schedules.server.actions import pause
from schedules.server.state import usable_state

NAME = "pause"
EXIT_CODES = (
    "exit codes: 0 done; 1 it did not take effect, Temporal unreachable, the job has no "
    f"schedule; {COMMON_EXIT}"
)


def configure(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = command(
        subparsers,
        NAME,
        "pause a job's schedule, saying why",
        "Pause the job's schedule on Temporal with a note saying why. A sync keeps an "
        "operator's pause; `resume` lifts it.",
        EXIT_CODES,
    )
    add_job(parser)
    parser.add_argument("--note", required=True, metavar="TEXT", help="why (required)")
    add_cluster_wait(parser)
    return parser


async def run(args: argparse.Namespace, ctx: Context) -> int:
    job = catalog_job(args.catalog, args.job)
    if not args.note.strip():
        raise BadInputError("--note: say why the job is paused, e.g. --note 'ledger migration'")
    client = await ctx.client()
    await usable_state(client, job.id, retry=ctx.retry)
    await pause(client, job.id, args.note, retry=ctx.retry)
    print(f"paused {job.id}: {args.note}")
    print(f"resume with: python -m schedules resume {job.id}")
    return 0
