"""`python -m schedules`: the parser of every command, and the one way a command ends.

Every command is a module of this package with `NAME`, `configure(subparsers)` (its
arguments, help and exit codes) and `run(args, ctx)` (returns the exit code), registered
in `COMMANDS`, the one list of them. Errors a command raises end it here: a user error is
one line and its `exit_code`, a bug one line and exit 1, a traceback only with `--debug`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path

from temporalio.service import RPCError

from core import redact
from core.errors import SchedulerError, first_line
from schedules.cli import (
    audit,
    backfill,
    check,
    compat,
    describe,
    explain,
    init,
    list_jobs,
    next_times,
    outbox,
    pause,
    resume,
    runs,
    sync,
    tenants,
    trigger,
    validate,
    verify,
)
from schedules.cli.context import (
    CLUSTER_WAIT_HELP,
    FAIL_FAST_SECONDS,
    Context,
    non_negative_seconds,
)
from worker.logs import RedactingFilter, quiet_libraries
from worker.process import Parser

# In the order `--help` lists them.
COMMANDS = (
    validate,
    sync,
    audit,
    explain,
    list_jobs,
    describe,
    next_times,
    trigger,
    backfill,
    pause,
    resume,
    outbox,
    runs,
    check,
    compat,
    verify,
    tenants,
    init,
)

EXIT_CODES = (
    "exit codes: 0 success; 1 failure (Temporal or PostgreSQL unreachable, a command that "
    "could not be carried out); 2 bad input (usage, an invalid catalog, an unknown job). "
    "A server that cannot be reached is one line naming its address, within about "
    f"{FAIL_FAST_SECONDS:g}s; only the commands that write (sync, trigger, backfill, pause, "
    "resume) wait for a starting cluster, and only when given --wait-for-cluster SECONDS"
)
WRITES = ("sync", "trigger", "backfill", "pause", "resume")


def build_parser() -> argparse.ArgumentParser:
    # No abbreviations: `--wait SECONDS` before the command, the spelling of
    # --wait-for-cluster that v3's scripts used, is refused, not taken for a prefix of it.
    parser = Parser(
        prog="python -m schedules",
        description="Define, register and steer the job catalog's Temporal schedules.",
        epilog=EXIT_CODES,
        allow_abbrev=False,
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
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS:
        command = module.configure(subparsers)
        command.set_defaults(handler=module.run)
        # Accepted after the command too (`validate --catalog X`, `tenants list --debug`);
        # there they override the ones given before it, and when left out there they leave
        # those alone.
        for where in _and_subcommands(command):
            _add_global_options(where, default=argparse.SUPPRESS)
            if not where.get_default("waits_for_cluster"):
                # Said the same either side: a read-only command does not wait (`_context`).
                where.add_argument(
                    "--wait-for-cluster",
                    dest="cluster_wait",
                    type=non_negative_seconds,
                    default=argparse.SUPPRESS,
                    help=argparse.SUPPRESS,
                )
    return parser


def _and_subcommands(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """`parser` and, for a command with commands of its own (`tenants`), each of those."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases share a parser
                found += _and_subcommands(sub)
    return found


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
        help="your catalog file (default: SCHEDULES_CATALOG, else the packaged "
        "schedules/jobs.toml); the engine's jobs (schedules/engine.toml) are read beside it",
    )
    parser.add_argument(
        "--without-engine",
        action="store_true",
        default=default if default is argparse.SUPPRESS else False,
        help="read the catalog file alone, without the engine's jobs (the outbox relay, the "
        "runtime dispatchers): for tests and fleets whose engine jobs another catalog "
        "keeps; sync never prunes the engine's schedules all the same",
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
    if args.cluster_wait is None:
        return Context()
    return Context(args.cluster_wait, waiting_for_cluster=True)


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    _configure_logging(args.debug)
    ctx = _context(parser, args)
    try:
        if args.catalog is None:  # the setting's, only when the option leaves it out
            args.catalog = ctx.settings.schedules_catalog
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
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as Unix tools do
        # Python flushes stdout again at exit: point it at /dev/null so that cannot fail too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as exc:  # a bug: say what, and how to see more
        if args.debug:
            raise
        print(
            f"error: unexpected {type(exc).__name__}: {redact.scrub(first_line(exc, ''))} "
            "(run with --debug for the traceback)",
            file=sys.stderr,
        )
        return 1
