"""`python -m schedules outbox`: the outbox's messages counted by type and state, then the
newest ones (no customer data). Read-only; `python -m worker outbox` is the same report.
"""

from __future__ import annotations

import argparse
import asyncio
import json

import psycopg

from activities.outbox import format_messages, recent_messages
from core import redact
from core.errors import SchedulerError
from schedules.cli import context as cli
from schedules.cli.context import Context
from schedules.record import database_hint
from schedules.server.state import DatabaseUnavailableError

EXIT_OUTBOX = "exit codes: 0 shown; 1 PostgreSQL unreachable; 2 bad input (--limit out of range)"


class OutboxInputError(SchedulerError):
    """A `--limit` the outbox report cannot use."""


async def _outbox(args: argparse.Namespace, ctx: Context) -> int:
    if not 1 <= args.limit <= 10_000:
        raise OutboxInputError(f"--limit: must be between 1 and 10000, got {args.limit}")
    try:
        rows, totals, by_type = await asyncio.to_thread(
            recent_messages, ctx.settings.database_url.get_secret_value(), args.limit
        )
    except psycopg.Error as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise DatabaseUnavailableError(
            f"PostgreSQL is unavailable: {redact.scrub(first)} {database_hint()}"
        ) from None
    if args.json:
        print(json.dumps({"totals": totals, "by_type": by_type, "newest": rows}, default=str))
    else:
        print(format_messages(rows, totals, by_type))
    return 0


def add(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "outbox",
        help="the outbox: counts by type and state (pending, dispatched, dead), newest messages",
        description="Count the outbox's messages by type and state (pending, dispatched, "
        "dead), then list the newest ones (no customer data). Read-only.",
        epilog=EXIT_OUTBOX,
    )
    parser.add_argument(
        "--limit", type=int, default=20, metavar="N", help="newest messages to list (default 20)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.set_defaults(handler=_outbox)


cli._EXTRA_COMMANDS.append(add)
