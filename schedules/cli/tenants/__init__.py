"""`python -m schedules tenants SUBCOMMAND`: runtime schedules on the command line, the same
operations as the Python API (`schedules.tenants`).

One command with subcommands, each a function `run(args, ctx)` configured by the module
that holds it: `write` (create, update, pause, resume, delete), `read` (show, list, next,
explain, runs), `slots` (trigger, backfill), `bulk` (import, export), `limits` (a
tenant's dispatch limits: set, show, clear), `notify` (where a tenant's notices go).
"""

from __future__ import annotations

import argparse

from schedules.cli.context import Context, command
from schedules.cli.tenants import bulk, limits, notify, read, slots, write
from schedules.cli.tenants.common import EXIT_CODES

NAME = "tenants"
HELP = "runtime schedules: create, update, pause, import ... (schedules.tenants)"
DESCRIPTION = (
    "Runtime schedules, the ones an application creates at runtime (one per customer, "
    "say), kept in PostgreSQL and run by the dispatcher jobs. Every write records who "
    "(--by, default the login name) in the schedule's change log."
)
# In the order `tenants --help` lists them.
GROUPS = (write, read, slots, bulk, limits, notify)


def configure(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = command(subparsers, NAME, HELP, DESCRIPTION, EXIT_CODES)
    commands = parser.add_subparsers(dest="tenants_command", required=True, metavar="SUBCOMMAND")
    for group in GROUPS:
        group.configure(commands)
    return parser


async def run(args: argparse.Namespace, ctx: Context) -> int:
    return await args.tenants_handler(args, ctx)
