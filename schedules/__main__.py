"""`python -m schedules`: define, register and steer the catalog's schedules on Temporal."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from datetime import UTC, datetime
from pathlib import Path

from temporalio.service import RPCError

from core import redact
from core.errors import CatalogError, SchedulerError
from schedules import progress
from schedules.catalog.model import load_catalog

# Importing these registers their commands (audit; explain; list, describe, next, trigger ...;
# outbox; runs).
from schedules.cli import audit, explain, operate, outbox, runs  # noqa: F401
from schedules.cli.check import add_check_command
from schedules.cli.context import (
    CLUSTER_WAIT_HELP,
    FAIL_FAST_SECONDS,
    Context,
    Parser,
    add_cluster_wait,
    non_negative_seconds,
    register,
)
from schedules.cli.verify import add_verify_command, verdict_lines
from schedules.sync.plan import compile_jobs, format_report, sync
from schedules.sync.safety import DEFAULT_MAX_PRUNE, SyncIncompleteError, check_prune
from worker.logs import RedactingFilter, quiet_libraries
from worker.process import exit_process
from worker.settings import Settings

EXIT_CODES = (
    "exit codes: 0 success; 1 failure (Temporal or PostgreSQL unreachable, a command that "
    "could not be carried out); 2 bad input (usage, an invalid catalog, an unknown job). "
    "A server that cannot be reached is one line naming its address, within about "
    f"{FAIL_FAST_SECONDS:g}s; only the commands that write (sync, trigger, backfill, pause, "
    "resume) wait for a starting cluster, and only when given --wait-for-cluster SECONDS"
)
WRITES = ("sync", "trigger", "backfill", "pause", "resume")
EXIT_SYNC = (
    "exit codes: 0 in line with the catalog, every written schedule checked on the server "
    "(or, with --dry-run, the plan shown); 1 Temporal unreachable, another sync holds the "
    "lock past --lock-wait, a write the server refused (what was applied and what was not is "
    "printed; run sync again), or a written schedule that fires other times than intended "
    "there (or could not be checked); 2 bad input: an invalid catalog, settings or "
    "arguments, or a prune of more than --max-prune of the managed schedules (also with "
    "--dry-run); nothing was changed"
)


async def _validate(args: argparse.Namespace, ctx: Context) -> int:
    jobs = load_catalog(args.catalog)
    if not jobs:  # valid TOML, but a sync of it would delete every managed schedule
        raise CatalogError(
            f"{args.catalog or 'schedules/jobs.toml'} has no jobs: a catalog schedules at least "
            "one (an empty file or one of comments is not a catalog; to remove every schedule, "
            "sync it with --max-prune 100)"
        )
    # Compiled too, as sync would: crons Temporal cannot express, schedules too large.
    compile_jobs(jobs, Settings.model_fields["temporal_task_queue"].default, datetime.now(UTC))
    print(f"catalog ok: {len(jobs)} job(s): {', '.join(job.id for job in jobs)}")
    return 0


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


async def _sync(args: argparse.Namespace, ctx: Context) -> int:
    jobs = load_catalog(args.catalog)  # validated before anything reaches Temporal,
    compile_jobs(jobs, ctx.settings.temporal_task_queue, datetime.now(UTC))  # and compiled
    client = await ctx.client()
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


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="python -m schedules",
        description="Define, register and steer the job catalog's Temporal schedules.",
        epilog=EXIT_CODES,
    )
    _add_global_options(parser, default=None)
    parser.add_argument(
        "--wait-for-cluster",
        dest="cluster_wait",
        type=non_negative_seconds,
        default=None,
        metavar="SECONDS",
        help=f"{CLUSTER_WAIT_HELP}; only for {', '.join(WRITES)}",
    )
    parser.add_argument(
        "--wait",
        dest="legacy_wait",
        type=non_negative_seconds,
        default=None,
        metavar="SECONDS",
        help="deprecated spelling of --wait-for-cluster, accepted only before the command; "
        "read-only commands ignore it (they fail fast). After `trigger` or `backfill`, "
        "--wait means: wait for the runs to finish",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    validate = commands.add_parser(
        "validate",
        help="check the catalog and list every problem; touches nothing",
        description="Validate the whole catalog. Every problem is listed with its job, field "
        "and value. Nothing is sent to Temporal.",
        epilog="exit codes: 0 valid; 2 invalid (a catalog without jobs included)",
    )
    validate.set_defaults(handler=_validate)

    sync_cmd = commands.add_parser(
        "sync",
        help="create, update and delete schedules to match the catalog",
        description="Create missing schedules, update only those that differ, and delete "
        "schedules this project manages that the catalog no longer has (--no-prune keeps "
        "them). Schedules not managed by this project are never touched. An operator's pause "
        "is kept and reported as drift unless the catalog itself pauses the job. An invalid "
        "catalog changes nothing. One sync at a time per namespace (a lock held in "
        "Temporal); creates and updates go first, deletes last. Every schedule written in "
        "calendars of the job's zone is then checked on the server, as `verify` does; one "
        "that fires otherwise there (the server's tz database disagrees) is recompiled to UTC "
        "calendars and checked again.",
        epilog=EXIT_SYNC,
    )
    sync_cmd.add_argument(
        "--dry-run", action="store_true", help="print the field-level diff; change nothing"
    )
    sync_cmd.add_argument(
        "--no-prune",
        action="store_true",
        help="keep managed schedules that the catalog no longer has",
    )
    sync_cmd.add_argument(
        "--max-prune",
        type=_percent,
        default=DEFAULT_MAX_PRUNE,
        metavar="PERCENT",
        help="refuse (exit 2, nothing changed) a sync that would delete more than this share "
        f"of the managed schedules, or all of them (default {DEFAULT_MAX_PRUNE * 100:.0f}%%); "
        "100 lets any prune through",
    )
    sync_cmd.add_argument(
        "--lock-wait",
        type=non_negative_seconds,
        default=60.0,
        metavar="SECONDS",
        help="how long to wait while another sync holds the namespace's sync lock "
        "(default 60); then exit 1",
    )
    sync_cmd.add_argument(
        "--full",
        action="store_true",
        help="describe every schedule instead of trusting the digest each one carries; "
        "finds and undoes edits made by other means than sync",
    )
    add_cluster_wait(sync_cmd)
    sync_cmd.set_defaults(handler=_sync)

    register(commands)
    add_check_command(commands)
    add_verify_command(commands)
    # Accepted after the command too (`validate --catalog X`); there they override the
    # ones given before it, and when left out there they leave those alone.
    for command in commands.choices.values():
        _add_global_options(command, default=argparse.SUPPRESS)
    return parser


def _add_global_options(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument(
        "--debug",
        action="store_true",
        default=default if default is argparse.SUPPRESS else False,
        help="show tracebacks on errors",
    )
    parser.add_argument(
        "--catalog",
        type=Path,
        default=default,
        metavar="PATH",
        help="catalog file (default: the packaged schedules/jobs.toml)",
    )


def _configure_logging(debug: bool) -> None:
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING)
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
    quiet_libraries()


def _context(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Context:
    """Fail fast, unless a command that writes was asked to wait for a starting cluster."""
    if not getattr(args, "waits_for_cluster", False):
        if args.cluster_wait is not None:
            parser.error(
                f"--wait-for-cluster: `{args.command}` does not wait for a cluster (only "
                f"{', '.join(WRITES)} do); it fails within about {FAIL_FAST_SECONDS:g}s"
            )
        return Context()
    wait = args.cluster_wait if args.cluster_wait is not None else args.legacy_wait
    if wait is None:
        return Context()
    return Context(wait, waiting_for_cluster=True)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _configure_logging(args.debug)
    ctx = _context(parser, args)
    try:
        return asyncio.run(args.handler(args, ctx))
    except SchedulerError as exc:
        if args.debug:
            raise
        print(f"error: {redact.scrub(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except RPCError as exc:  # a refusal no command expected: one line, not a traceback
        if args.debug:
            raise
        status = exc.status.name if exc.status is not None else "error"
        print(f"error: Temporal refused: {status}: {redact.scrub(exc.message)}", file=sys.stderr)
        return 1
    except Exception as exc:  # a bug: say what, and how to see more
        if args.debug:
            raise
        lines = str(exc).strip().splitlines()
        print(
            f"error: unexpected {type(exc).__name__}: {redact.scrub(lines[0] if lines else '')} "
            "(run with --debug for the traceback)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    exit_process(main())
