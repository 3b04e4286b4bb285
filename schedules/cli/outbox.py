"""`python -m schedules outbox`: the outbox's messages counted by type and state, then the
newest ones (no customer data). Read-only; `python -m worker outbox` is the same report.
"""

from __future__ import annotations

import argparse
import asyncio
import json

import psycopg

from activities.outbox.messages import format_messages, recent_messages
from core import redact
from core.errors import first_line
from schedules.cli import context as cli
from schedules.record import DatabaseUnavailableError, database_hint

NAME = "outbox"
HELP = "the outbox: counts by type and state (pending, dispatched, dead), newest messages"
DESCRIPTION = (
    "Count the outbox's messages by type and state (pending, dispatched, "
    "dead), then list the newest ones (no customer data). Read-only."
)
EXIT_CODES = "exit codes: 0 shown; 1 PostgreSQL unreachable; 2 bad input (--limit out of range)"


def configure(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = cli.command(subparsers, NAME, HELP, DESCRIPTION, EXIT_CODES)
    parser.add_argument(
        "--limit", type=int, default=20, metavar="N", help="newest messages to list (default 20)"
    )
    cli.add_json(parser)
    return parser


async def run(args: argparse.Namespace, ctx: cli.Context) -> int:
    if not 1 <= args.limit <= 10_000:
        raise cli.BadInputError(f"--limit: must be between 1 and 10000, got {args.limit}")
    try:
        rows, totals, by_type = await asyncio.to_thread(
            recent_messages, cli.database_url(ctx), args.limit
        )
    except psycopg.Error as exc:
        raise DatabaseUnavailableError(
            f"PostgreSQL is unavailable: {redact.scrub(first_line(exc))} {database_hint()}"
        ) from None
    if args.json:
        print(json.dumps({"totals": totals, "by_type": by_type, "newest": rows}, default=str))
    else:
        print(format_messages(rows, totals, by_type))
    return 0
