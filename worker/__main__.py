"""`python -m worker` runs a worker replica; `python -m worker migrate` applies migrations."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Mapping

import psycopg
import psycopg_pool

from core import redact
from core.errors import SchedulerError, SettingsError, setting_hint, transport_cause
from worker.logs import configure_logging
from worker.migrate import apply_migrations
from worker.process import Parser, exit_process
from worker.settings import load_settings

logger = logging.getLogger("worker")

EXIT_CODES = (
    "Exit codes: 0 ok; 1 a server unreachable (PostgreSQL, Temporal) or an unexpected "
    "failure; 2 bad settings or usage (one line naming the variable)."
)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if not 1 <= value <= 10_000:
        raise argparse.ArgumentTypeError(f"must be between 1 and 10000, got {value}")
    return value


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return redact.scrub(lines[0] if lines else type(exc).__name__)


def main(argv: list[str] | None = None) -> int:
    parser = Parser(
        prog="python -m worker",
        description="Run a scheduled-jobs worker replica (default) or apply migrations.",
        epilog=EXIT_CODES,
    )
    parser.add_argument(
        "command",
        nargs="?",
        default="run",
        choices=["run", "migrate", "outbox", "health"],
        help="run: serve the task queue (default); migrate: apply migrations and exit; "
        "outbox: the messages by type and state, then the newest (as `python -m schedules "
        "outbox`); health: exit 0 if a worker on this host polls the task queues of its WORKER_ROLE, 1 if not",
    )
    parser.add_argument(
        "--limit", type=_positive, default=20, help="outbox: how many messages (1-10000)"
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    args = parser.parse_args(argv)
    try:
        settings = load_settings()  # a malformed value first, then what is missing
        require_connection_settings(args.command, os.environ)
        configure_logging(settings.log_format, logging.DEBUG if args.debug else logging.INFO)
        return _run(args, settings)
    except SchedulerError as exc:
        if args.debug:
            raise
        print(f"error: {redact.scrub(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except (psycopg.errors.ConnectionTimeout, psycopg_pool.PoolTimeout) as exc:
        if args.debug:
            raise
        print(
            f"error: cannot reach the database at {settings.database_address} within "
            f"{settings.database_connect_timeout_seconds}s: {_first_line(exc)} (DATABASE_URL, "
            "DATABASE_CONNECT_TIMEOUT_SECONDS)",
            file=sys.stderr,
        )
        return 1
    except psycopg.OperationalError as exc:
        if args.debug:
            raise
        print(
            f"error: cannot reach the database at {settings.database_address}: "
            f"{_first_line(exc)} {setting_hint('DATABASE_URL')}",
            file=sys.stderr,
        )
        return 1
    except psycopg.Error as exc:
        if args.debug:
            raise
        print(f"error: the database refused: {_first_line(exc)}", file=sys.stderr)
        return 1
    except RuntimeError as exc:  # the Temporal SDK's "Failed client connect"
        if args.debug or "client connect" not in str(exc):
            raise
        print(
            f"error: cannot reach Temporal at {redact.scrub(settings.temporal_address)}: "
            f"{transport_cause(exc)} {setting_hint('TEMPORAL_ADDRESS')}",
            file=sys.stderr,
        )
        return 1


# What each command must be told, not take from the local stack's defaults: a worker that
# joins a database or a cluster by default joins the wrong one in silence. `make run`
# passes both to the workers it starts; `outbox` and `health` only read, from a checkout
# beside a running `make run`.
REQUIRED = {"run": ("TEMPORAL_ADDRESS", "DATABASE_URL"), "migrate": ("DATABASE_URL",)}
_EXAMPLES = {
    "TEMPORAL_ADDRESS": "TEMPORAL_ADDRESS=temporal-frontend:7233",
    "DATABASE_URL": "DATABASE_URL=postgresql://scheduled_jobs_app@db-host:5432/scheduled_jobs",
}


def require_connection_settings(command: str, environ: Mapping[str, str]) -> None:
    """Raise `SettingsError` naming each variable `command` needs that is not set."""
    env = {k.upper() for k, v in environ.items() if v.strip()}
    missing = [name for name in REQUIRED.get(command, ()) if name not in env]
    if missing:
        shown = "python -m worker" + ("" if command == "run" else f" {command}")
        raise SettingsError(
            f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set: "
            f"`{shown}` outside `make run` must be told where to connect "
            f"(e.g. {', '.join(_EXAMPLES[name] for name in missing)}); "
            "`make run` sets them for the workers it starts"
        )


def _run(args: argparse.Namespace, settings) -> int:
    if args.command == "migrate":
        applied = apply_migrations(settings.database_conninfo)
        names = ", ".join(m.label for m in applied) or "none"
        print(f"migrations applied: {names}")
        if settings.app_database_role:
            from worker.app_role import ensure_app_role

            password = settings.app_database_password
            created = ensure_app_role(
                settings.database_url.get_secret_value(),
                settings.app_database_role,
                password.get_secret_value() if password else "",
            )
            print(
                f"application role {settings.app_database_role}: "
                f"{'created' if created else 'updated'}, rows of the schema granted"
            )
        return 0
    if args.command == "health":
        from worker.health import polling_here

        healthy = asyncio.run(polling_here(settings))
        print("healthy: polling" if healthy else "unhealthy: no worker of this host polls")
        return 0 if healthy else 1
    if args.command == "outbox":
        from activities.outbox.messages import recent_messages
        from jobs.outbox_relay.report import format_messages

        print(format_messages(*recent_messages(settings.database_conninfo, args.limit)))
        return 0
    from worker.run import run_worker

    asyncio.run(run_worker(settings))
    return 0


if __name__ == "__main__":
    try:
        code = main()
    except Exception:  # a bug: its traceback goes through the scrubbing log handler
        if not logging.getLogger().handlers:
            configure_logging()
        logger.exception("worker failed")
        code = 1
    exit_process(code)
