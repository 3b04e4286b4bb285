"""`python -m schedules pause JOB --note TEXT`: pause a job's schedule, saying why."""

from __future__ import annotations

import argparse

from schedules.cli import context as cli
from schedules.cli.pauses import warn_unrecorded
from schedules.operator_actions import pause_job

NAME = "pause"
HELP = "pause a job's schedule, saying why"
DESCRIPTION = (
    "Pause the job's schedule on Temporal with a note saying why, recording who (--by) "
    "for `explain` and `next`. A sync keeps an operator's pause; `resume` lifts it."
)
EXIT_CODES = (
    "exit codes: 0 done; 1 it did not take effect, Temporal unreachable, the job has no "
    f"schedule; {cli.COMMON_EXIT}"
)


def configure(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = cli.command(subparsers, NAME, HELP, DESCRIPTION, EXIT_CODES)
    cli.add_job(parser)
    parser.add_argument(
        "--note", required=True, type=cli.shown_text, metavar="TEXT", help="why (required)"
    )
    parser.add_argument(
        "--by",
        type=cli.shown_text,
        metavar="WHO",
        help="who pauses it, as `explain` and `next` then say (default: cli:<login name>)",
    )
    cli.add_cluster_wait(parser)
    return parser


async def run(args: argparse.Namespace, ctx: cli.Context) -> int:
    job = cli.catalog_job(args, args.job)
    if not args.note.strip():
        raise cli.BadInputError("--note: say why the job is paused, e.g. --note 'ledger migration'")
    client = await ctx.client()
    acted = await pause_job(
        client,
        job,
        args.note,
        who=cli.operator(args.by),
        conninfo=ctx.settings.database_url.get_secret_value(),
        retry=ctx.retry,
    )
    if acted.unrecorded:
        warn_unrecorded("pause", job.id, acted.unrecorded, "cannot excuse its fire times")
    print(f"paused {job.id}: {args.note}")
    print(f"resume with: python -m schedules resume {job.id}")
    return 0
