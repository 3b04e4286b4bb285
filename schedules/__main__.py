"""`python -m schedules`: register and steer the catalog's schedules on Temporal."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from temporalio.service import RPCError, RPCStatusCode
from tenacity import AsyncRetrying, retry_if_exception, stop_after_delay, wait_exponential

from schedules.catalog import CATALOG
from schedules.sync import sync
from worker.client import connect
from worker.errors import SchedulerError
from worker.process import exit_process
from worker.settings import load_settings

EXIT_CODES = "Exit codes: 0 success; 1 unexpected failure (e.g. Temporal unreachable); 2 bad input."


_TRANSIENT = {
    RPCStatusCode.UNAVAILABLE,
    RPCStatusCode.DEADLINE_EXCEEDED,
    RPCStatusCode.RESOURCE_EXHAUSTED,
    RPCStatusCode.INTERNAL,  # a fresh server's "shard status unknown"
    RPCStatusCode.NOT_FOUND,  # a namespace that is still being registered
}


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, RPCError):
        return exc.status in _TRANSIENT
    return isinstance(exc, RuntimeError)  # the SDK's "failed client connect"


async def _sync(args: argparse.Namespace) -> int:
    settings = load_settings()
    # A cluster that just became healthy may still refuse schedule calls for a while.
    retrying = AsyncRetrying(
        retry=retry_if_exception(_transient),
        stop=stop_after_delay(args.wait),
        wait=wait_exponential(multiplier=0.25, max=5),
        reraise=True,
    )
    try:
        async for attempt in retrying:
            with attempt:
                client = await connect(settings)
                report = await sync(client, CATALOG, settings.temporal_task_queue)
    except (RPCError, RuntimeError) as exc:
        if not _transient(exc):
            raise
        print(
            f"error: cannot reach Temporal at {settings.temporal_address} "
            f"within {args.wait:g}s: {exc}",
            file=sys.stderr,
        )
        return 1
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
    sync_parser = commands.add_parser(
        "sync",
        help="create or update a schedule for every job in the catalog",
        description="Create missing schedules and update existing ones to match the catalog. "
        "An operator's pause is kept unless the catalog itself pauses the job.",
        epilog=EXIT_CODES,
    )
    sync_parser.add_argument(
        "--wait",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="keep retrying while Temporal is unreachable or starting, up to this long "
        "(default 60)",
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
