"""`python -m worker` runs a worker replica; `python -m worker migrate` applies migrations."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

import psycopg

from core.errors import SchedulerError
from worker.logs import configure_logging
from worker.migrate import apply_migrations
from worker.process import exit_process
from worker.settings import load_settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m worker",
        description="Run a scheduled-jobs worker replica (default) or apply migrations.",
        epilog="Exit codes: 0 ok, 1 unexpected failure, 2 bad settings or usage.",
    )
    parser.add_argument(
        "command",
        nargs="?",
        default="run",
        choices=["run", "migrate", "outbox", "health"],
        help="run: serve the task queue (default); migrate: apply migrations and exit; "
        "outbox: show the newest outbox messages; health: exit 0 if a worker on this host "
        "is polling the task queue, 1 if not",
    )
    parser.add_argument("--limit", type=int, default=20, help="outbox: how many messages")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    args = parser.parse_args(argv)
    try:
        settings = load_settings()
        configure_logging(settings.log_format, logging.DEBUG if args.debug else logging.INFO)
        if args.command == "migrate":
            applied = apply_migrations(settings.database_url.get_secret_value())
            names = ", ".join(f"{m.version:04d}_{m.name}" for m in applied) or "none"
            print(f"migrations applied: {names}")
            return 0
        if args.command == "health":
            from worker.health import polling_here

            healthy = asyncio.run(polling_here(settings))
            print("healthy: polling" if healthy else "unhealthy: no worker of this host polls")
            return 0 if healthy else 1
        if args.command == "outbox":
            from activities.outbox import format_messages, recent_messages

            print(
                format_messages(
                    *recent_messages(settings.database_url.get_secret_value(), args.limit)
                )
            )
            return 0
        from worker.run import run_worker

        asyncio.run(run_worker(settings))
        return 0
    except SchedulerError as exc:
        if args.debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except psycopg.OperationalError as exc:
        if args.debug:
            raise
        print(
            f"error: cannot reach the database: {str(exc).strip().splitlines()[0]}", file=sys.stderr
        )
        return 1


if __name__ == "__main__":
    exit_process(main())
