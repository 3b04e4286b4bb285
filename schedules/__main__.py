"""`python -m schedules`: define, register and steer the catalog's schedules on Temporal."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

import schedules.operate  # noqa: F401  (registers list, describe, next, trigger ...)
from core.errors import SchedulerError
from schedules.catalog import load_catalog
from schedules.check_cli import add_check_command
from schedules.cli import Context, register
from schedules.sync import format_report, sync
from schedules.verify_cli import add_verify_command, verdict_lines
from worker.process import exit_process

EXIT_CODES = (
    "exit codes: 0 success; 1 failure (Temporal unreachable, a command that could not be "
    "carried out); 2 bad input (usage, an invalid catalog, an unknown job)"
)
EXIT_SYNC = (
    "exit codes: 0 synced, every written schedule checked on the server; 1 Temporal "
    "unreachable, or a written schedule that fires other times than intended there (or "
    "could not be checked); 2 bad input (usage, an invalid catalog)"
)


async def _validate(args: argparse.Namespace, ctx: Context) -> int:
    jobs = load_catalog(args.catalog)
    print(f"catalog ok: {len(jobs)} job(s): {', '.join(job.id for job in jobs)}")
    return 0


async def _sync(args: argparse.Namespace, ctx: Context) -> int:
    jobs = load_catalog(args.catalog)  # validated before anything reaches Temporal
    client = await ctx.client()
    report = await ctx.retrying(
        lambda: sync(
            client,
            jobs,
            ctx.settings.temporal_task_queue,
            prune=not args.no_prune,
            dry_run=args.dry_run,
            full=args.full,
        )
    )
    print(format_report(report, args.dry_run))
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
    parser = argparse.ArgumentParser(
        prog="python -m schedules",
        description="Define, register and steer the job catalog's Temporal schedules.",
        epilog=EXIT_CODES,
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    parser.add_argument(
        "--catalog",
        type=Path,
        default=None,
        metavar="PATH",
        help="catalog file (default: the packaged schedules/jobs.toml)",
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="keep retrying while Temporal is unreachable or starting, up to this long "
        "(default 60)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    validate = commands.add_parser(
        "validate",
        help="check the catalog and list every problem; touches nothing",
        description="Validate the whole catalog. Every problem is listed with its job, field "
        "and value. Nothing is sent to Temporal.",
        epilog="exit codes: 0 valid; 2 invalid",
    )
    validate.set_defaults(handler=_validate)

    sync_cmd = commands.add_parser(
        "sync",
        help="create, update and delete schedules to match the catalog",
        description="Create missing schedules, update only those that differ, and delete "
        "schedules this project manages that the catalog no longer has (--no-prune keeps "
        "them). Schedules not managed by this project are never touched. An operator's pause "
        "is kept and reported as drift unless the catalog itself pauses the job. An invalid "
        "catalog changes nothing. Every schedule written in calendars of the job's zone is then "
        "checked on the server, as `verify` does; one that fires otherwise there (the "
        "server's tz database disagrees) is recompiled to UTC calendars and checked again.",
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
        "--full",
        action="store_true",
        help="describe every schedule instead of trusting the digest each one carries; "
        "finds and undoes edits made by other means than sync",
    )
    sync_cmd.set_defaults(handler=_sync)

    register(commands)
    add_check_command(commands)
    add_verify_command(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING)
    ctx = Context(args.wait)
    try:
        return asyncio.run(args.handler(args, ctx))
    except SchedulerError as exc:
        if args.debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    exit_process(main())
