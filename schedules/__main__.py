"""`python -m schedules`: register and steer the catalog's schedules on Temporal."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from schedules.catalog import CATALOG
from schedules.sync import sync
from worker.client import connect
from worker.errors import SchedulerError
from worker.process import exit_process
from worker.settings import load_settings

EXIT_CODES = "Exit codes: 0 success; 1 unexpected failure (e.g. Temporal unreachable); 2 bad input."


async def _sync(args: argparse.Namespace) -> int:
    settings = load_settings()
    try:
        client = await connect(settings)
    except RuntimeError as exc:  # the SDK's connection failure
        print(
            f"error: cannot reach Temporal at {settings.temporal_address}: {exc}", file=sys.stderr
        )
        return 1
    report = await sync(client, CATALOG, settings.temporal_task_queue)
    for job_id in report.created:
        print(f"created  {job_id}")
    for job_id in report.updated:
        print(f"updated  {job_id}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m schedules",
        description="Manage the Temporal schedules of the job catalog.",
        epilog=EXIT_CODES,
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "sync",
        help="create or update a schedule for every job in the catalog",
        description="Create missing schedules and update existing ones to match the catalog. "
        "An operator's pause is kept unless the catalog itself pauses the job.",
        epilog=EXIT_CODES,
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING)
    try:
        return asyncio.run(_sync(args))
    except SchedulerError as exc:
        if args.debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    exit_process(main())
