"""`python -m schedules next JOB`: a job's next fire times, computed here; the server is
asked only whether the schedule is paused (and PostgreSQL by whom)."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from core.errors import TemporalUnreachableError
from schedules.catalog.model import JobSpec
from schedules.cli import context as cli
from schedules.cli.format import format_next, next_entry
from schedules.health.evidence import paused_by
from schedules.server.state import OperationError, schedule_state
from timing import TICK

NAME = "next"
HELP = "a job's next fire times in local time and UTC, DST changes flagged"
DESCRIPTION = (
    "The job's next fire times, computed from its catalog entry with the project's DST "
    "rules (a fixed-time job in the spring-forward gap runs at the first valid instant "
    "after it; in the repeated fall-back hour it runs once, at the first occurrence). "
    "A paused job (by the catalog or an operator: Temporal is asked) is said to be "
    "paused, by whom and why; its times are those after a resume. An unreachable "
    "Temporal is one warning line: the times are still listed."
)
EXIT_CODES = (
    "exit codes: 0 listed (an unreachable Temporal is a warning: the times are computed "
    f"here); {cli.COMMON_EXIT} or time"
)


def configure(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = cli.command(subparsers, NAME, HELP, DESCRIPTION, EXIT_CODES)
    cli.add_job(parser)
    parser.add_argument(
        "-n", type=cli.count, default=5, metavar="N", help="how many (default 5, at most 1000)"
    )
    parser.add_argument(
        "--from",
        dest="from_time",
        metavar="TIME",
        help="list the runs at or after TIME instead of now: 2027-03-13, 2027-03-13T02:00 "
        "(both in the job's time zone) or 2027-03-13T07:00:00Z",
    )
    cli.add_json(parser)
    return parser


async def run(args: argparse.Namespace, ctx: cli.Context) -> int:
    job = cli.catalog_job(args, args.job)
    now = datetime.now(UTC)
    if not 1 <= args.n <= 1000:
        raise cli.BadInputError(f"-n: must be between 1 and 1000, got {args.n}")
    if args.from_time:
        after = cli.job_time(args.from_time, job, now, "--from")
        times = job.timing.upcoming(after - TICK, args.n)  # at or after
    else:
        after, times = now, job.timing.upcoming(now, args.n)
    paused_by, note = await _paused(job, ctx)
    entry = next_entry(job, after, times, paused_by=paused_by, note=note)
    if args.json:
        cli.print_json(entry)
    else:
        print(format_next(entry))
    return 0


async def _paused(job: JobSpec, ctx: cli.Context) -> tuple[str | None, str | None]:
    """Who paused the job's schedule on the server and why, or (None, None) if it runs.
    Best-effort: the times are computed here, so an unreachable Temporal is one warning
    line and the catalog's pause alone is said."""
    try:
        state = await schedule_state(await ctx.client(), job.id, retry=ctx.retry)
    except (TemporalUnreachableError, OperationError) as exc:
        print(f"warning: an operator's pause cannot be seen: {exc}", file=sys.stderr)
        return None, None
    if not (state.usable and state.paused):
        return None, None
    return await paused_by(cli.database_url(ctx), job.id, catalog=job.paused), state.note
