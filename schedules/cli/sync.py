"""`python -m schedules sync`: create, update and delete schedules to match the catalog."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from schedules import progress
from schedules.catalog.model import load_catalog
from schedules.cli import context as cli
from schedules.cli.pauses import best_effort
from schedules.cli.verify import verdict_lines
from schedules.pauses import paused_by_sync, record_pause
from schedules.sync.apply import sync
from schedules.sync.plan import compile_jobs
from schedules.sync.report import format_report
from schedules.sync.safety import DEFAULT_MAX_PRUNE, SyncIncompleteError, check_prune
from schedules.sync.shards import plan_shards, shards_line

NAME = "sync"
HELP = "create, update and delete schedules to match the catalog"
DESCRIPTION = (
    "Create missing schedules, update only those that differ, and delete "
    "schedules this project manages that the catalog no longer has (--no-prune keeps "
    "them). Schedules not managed by this project are never touched. An operator's pause "
    "is kept and reported as drift unless the catalog itself pauses the job. An invalid "
    "catalog changes nothing. One sync at a time per namespace (a lock held in "
    "Temporal); creates and updates go first, deletes last. Every schedule written in "
    "calendars of the job's zone is then checked on the server, as `verify` does; one "
    "that fires otherwise there (the server's tz database disagrees) is recompiled to UTC "
    "calendars and checked again."
)
EXIT_CODES = (
    "exit codes: 0 in line with the catalog, every written schedule checked on the server "
    "(or, with --dry-run, the plan shown); 1 Temporal or PostgreSQL (the dispatch shards) "
    "unreachable, another sync holds the "
    "lock past --lock-wait, a write the server refused (what was applied and what was not is "
    "printed; run sync again), or a written schedule that fires other times than intended "
    "there (or could not be checked); 2 bad input: an invalid catalog, settings or "
    "arguments, or a prune of more than --max-prune of the managed schedules (also with "
    "--dry-run); nothing was changed"
)


def _percent(text: str) -> float:
    try:
        value = float(text.rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a percentage from 0 to 100, got {text!r}"
        ) from None
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"must be a percentage from 0 to 100, got {text!r}")
    return value / 100


def configure(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = cli.command(subparsers, NAME, HELP, DESCRIPTION, EXIT_CODES)
    parser.add_argument(
        "--dry-run", action="store_true", help="print the field-level diff; change nothing"
    )
    parser.add_argument(
        "--no-prune",
        action="store_true",
        help="keep managed schedules that the catalog no longer has",
    )
    parser.add_argument(
        "--max-prune",
        type=_percent,
        default=DEFAULT_MAX_PRUNE,
        metavar="PERCENT",
        help="refuse (exit 2, nothing changed) a sync that would delete more than this share "
        f"of the managed schedules, or all of them (default {DEFAULT_MAX_PRUNE * 100:.0f}%%); "
        "100 lets any prune through",
    )
    parser.add_argument(
        "--lock-wait",
        type=cli.non_negative_seconds,
        default=60.0,
        metavar="SECONDS",
        help="how long to wait while another sync holds the namespace's sync lock "
        "(default 60); then exit 1",
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="describe every schedule instead of trusting the digest each one carries; "
        "finds and undoes edits made by other means than sync",
    )
    cli.add_cluster_wait(parser)
    return parser


async def run(args: argparse.Namespace, ctx: cli.Context) -> int:
    jobs = load_catalog(
        args.catalog, engine=cli.with_engine(args)
    )  # validated before anything reaches Temporal,
    compile_jobs(jobs, ctx.settings.temporal_task_queue, datetime.now(UTC))  # and compiled
    client = await ctx.client()
    shards = None  # the engine's dispatchers follow RUNTIME_DISPATCH_SHARDS
    if cli.with_engine(args):
        wanted = ctx.settings.runtime_dispatch_shards
        shards = await plan_shards(cli.database_url(ctx), wanted, datetime.now(UTC))
        jobs = load_catalog(args.catalog, shards=shards.keep)
    started = datetime.now(UTC)  # before any write: a pause it applies is recorded from here
    try:
        report = await ctx.retrying(
            lambda: sync(
                client,
                jobs,
                ctx.settings.temporal_task_queue,
                prune=not args.no_prune,
                dry_run=args.dry_run,
                full=args.full,
                max_prune=args.max_prune,
                lock_wait=args.lock_wait,
                lock_lease=ctx.settings.sync_lock_seconds,
                progress=progress.for_stream(),
                conninfo=cli.database_url(ctx),
                shards=shards,
            )
        )
    except SyncIncompleteError as exc:
        for outcome in exc.outcomes:
            state = (
                "applied"
                if outcome.error is None and outcome.attempted
                else ("FAILED" if outcome.error else "not attempted")
            )
            print(f"{state:<14}{outcome.action} {outcome.job_id}")
        raise
    print(format_report(report, args.dry_run))
    if shards is not None:
        print(shards_line(shards, report.shards_from, args.dry_run))
    if not args.dry_run:
        for job_id in paused_by_sync(jobs, report):
            await best_effort(
                ctx,
                "pause",
                job_id,
                lambda url, job_id=job_id: record_pause(url, job_id, started, by="sync"),
            )
    if args.dry_run:
        check_prune(report.deleted, report.managed, args.max_prune)
    if report.unverified:
        # Written, but the server fires other times than intended (or could not be asked).
        print(
            f"error: {len(report.unverified)} written schedule(s) do not fire as intended on "
            "the server; `python -m schedules verify` shows them:",
            file=sys.stderr,
        )
        for verdict in report.unverified:
            for line in verdict_lines(verdict):
                print(f"  {line}", file=sys.stderr)
        return 1
    return 0
