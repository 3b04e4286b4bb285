"""`python -m schedules next JOB`: a job's next fire times, computed here; no server asked."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta

from schedules.cli import context as cli
from schedules.cli.format import format_next, next_entry

NAME = "next"
HELP = "a job's next fire times in local time and UTC, DST changes flagged"
DESCRIPTION = (
    "The job's next fire times, computed from its catalog entry with the project's DST "
    "rules (a fixed-time job in the spring-forward gap runs at the first valid instant "
    "after it; in the repeated fall-back hour it runs once, at the first occurrence). "
    "No server is asked: a job the catalog pauses is said to be paused (its times are "
    "those after a resume); an operator's pause shows in `list` and `describe`."
)
EXIT_CODES = f"exit codes: 0 listed (no server is contacted); {cli.COMMON_EXIT} or time"


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
    job = cli.catalog_job(args.catalog, args.job)
    now = datetime.now(UTC)
    if not 1 <= args.n <= 1000:
        raise cli.BadInputError(f"-n: must be between 1 and 1000, got {args.n}")
    if args.from_time:
        after = cli.job_time(args.from_time, job, now, "--from")
        times = job.timing.upcoming(after - timedelta(microseconds=1), args.n)  # at or after
    else:
        after, times = now, job.timing.upcoming(now, args.n)
    entry = next_entry(job, after, times)
    if args.json:
        cli.print_json(entry)
    else:
        print(format_next(entry))
    return 0
