"""`python -m schedules backfill JOB --start T --end T`: start the runs of a past range
(`schedules.backfill` does the work; this module reads the arguments and prints)."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from core.ids import workflow_id
from core.text import printable
from schedules import progress
from schedules.backfills import BACKFILL_HARD_LIMIT, backfill, backfill_times
from schedules.catalog.times import local_text, utc_text
from schedules.cli import context as cli
from schedules.cli.pauses import warn_unrecorded
from schedules.cli.wait import WAITED_EXIT, outcome_line, print_summary
from schedules.server.runs import DEFAULT_WAIT_SECONDS, run_ids, wait_for_slots
from schedules.server.state import usable_state

NAME = "backfill"
_UNSEEN = "cannot judge the slots it asks for before the job's timing took effect"
HELP = "start the runs of the fire times in a past range"
DESCRIPTION = (
    "Start one run per fire time in [--start, --end) under the job's own DST rules "
    "(the range must end by now: future times run on schedule), "
    "overlap BUFFER_ALL (one after another; none is dropped). The count is printed "
    "first; more than the maximum (--max, else BACKFILL_MAX_RUNS, default 50) needs "
    f"--yes, and more than {BACKFILL_HARD_LIMIT} is refused. A slot that already "
    "completed is a recorded no-op. The request is recorded in PostgreSQL for `schedules "
    "audit`, which expects a run of every slot asked for. Times without a UTC offset are "
    "in the job's zone. "
    "With --wait, wait until every run has finished, printing one line per run as it "
    "ends (slot, origin, status, duration, counts, error) and a count at the end."
)
EXIT_CODES = (
    "exit codes: 0 the runs were requested and the first started (or there were none); 1 "
    "the first run did not start within 10s (the server dropped the request, or a run in "
    "flight holds it in the schedule's buffer), Temporal unreachable, "
    f"the job has no schedule; {cli.COMMON_EXIT}, a bad range, more runs than the maximum "
    f"without --yes; {WAITED_EXIT}"
)


def configure(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = cli.command(subparsers, NAME, HELP, DESCRIPTION, EXIT_CODES)
    cli.add_job(parser)
    parser.add_argument("--start", required=True, metavar="TIME", help="first time (inclusive)")
    parser.add_argument("--end", required=True, metavar="TIME", help="end (exclusive)")
    parser.add_argument(
        "--max", type=cli.count, default=None, metavar="N", help="most runs without --yes"
    )
    parser.add_argument("--yes", action="store_true", help="start more than the maximum")
    parser.add_argument(
        "--wait",
        action="store_true",
        help="wait until every run has finished, printing one line per run as it ends: "
        "slot, origin, status, duration, counts (and the error of a failed one)",
    )
    cli.add_timeout(
        parser,
        None,
        f"with --wait: how long to wait for all the runs (default {DEFAULT_WAIT_SECONDS:g})",
    )
    cli.add_cluster_wait(parser)
    return parser


def _range(args: argparse.Namespace, job, now: datetime) -> tuple[datetime, datetime]:
    start = cli.job_time(args.start, job, now, "--start")
    end = cli.job_time(args.end, job, now, "--end")
    if start >= end:
        raise cli.BadInputError(f"--start {utc_text(start)} is not before --end {utc_text(end)}")
    if end > now:
        # Temporal starts a backfilled future time at once: work done for a slot whose time
        # has not come (invoices not yet due), and the slot then counts as done.
        which = "--start" if start > now else "--end"
        raise cli.BadInputError(
            f"{which} {utc_text(start if start > now else end)} is after now "
            f"({utc_text(now)}): backfill runs past fire times only (the next ones run on "
            "schedule); give --end now or an earlier time"
        )
    if args.timeout is not None and not args.wait:
        raise cli.BadInputError(
            "--timeout: applies only with --wait (how long to wait for the runs)"
        )
    return start, end


def _check_count(job_id: str, times: list[datetime], span: str, maximum: int, yes: bool) -> None:
    if len(times) > maximum and not yes:
        raise cli.BadInputError(
            f"backfill of {job_id!r} over {span} would start {len(times)} runs, more than "
            f"the maximum of {maximum}: pass --yes (or --max {len(times)}) to start all "
            f"{len(times)}, or give a shorter range"
        )


async def run(args: argparse.Namespace, ctx: cli.Context) -> int:
    job = cli.catalog_job(args, args.job)
    now = datetime.now(UTC)
    start, end = _range(args, job, now)
    timeout = args.timeout if args.timeout is not None else DEFAULT_WAIT_SECONDS
    maximum = args.max if args.max is not None else ctx.settings.backfill_max_runs
    try:
        times = backfill_times(job, start, end, now)  # more than the hard limit: refused
    except ValueError as exc:
        raise cli.BadInputError(str(exc)) from None
    span = f"[{utc_text(start)}, {utc_text(end)})"
    if not times:
        print(f"no fire times of {job.id} in {span}: nothing to start")
        return 0
    _check_count(job.id, times, span, maximum, args.yes)
    client, retry = await ctx.client(), ctx.retry
    state = await usable_state(client, job.id, retry=retry)
    print(
        f"backfill of {job.id}: {len(times)} run(s) in {span}, first "
        f"{local_text(times[0], job.timezone)}, last {local_text(times[-1], job.timezone)}"
    )
    ids = [workflow_id(job.id, t) for t in times]
    before = await run_ids(client, ids, retry=retry) if args.wait else {}
    done = await backfill(
        client, job, start, end, conninfo=cli.database_url(ctx), now=now, retry=retry
    )
    if done.unrecorded is not None:
        warn_unrecorded("backfill", job.id, done.unrecorded, _UNSEEN)
    print(
        f"requested: {done.how}, overlap BUFFER_ALL (one after another); a slot that already "
        "completed is a recorded no-op"
    )
    if state.paused:
        print(
            printable(
                f"note: the schedule is paused ({state.note or 'no note'}); backfills run anyway"
            )
        )
    if not args.wait:
        return 0
    sys.stdout.flush()
    bars = progress.for_stream()
    outcomes = await wait_for_slots(
        client,
        job.id,
        times,
        before,
        timeout,
        bars,
        report=lambda outcome: bars.write(outcome_line(outcome, job.timezone)),
        retry=retry,
    )
    return print_summary(outcomes, job.id, timeout)
