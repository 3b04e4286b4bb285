"""`python -m api serve` runs the HTTP API; `python -m api keys create | list | revoke`
manages its keys."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import sys
from datetime import UTC, datetime

from core import redact
from core.errors import SchedulerError
from worker.process import Parser, exit_process

EXIT_CODES = (
    "Exit codes: 0 ok; 1 PostgreSQL unreachable or an unexpected failure; 2 bad settings "
    "or usage, an unknown key id (one line naming the variable, option or id)."
)


def _key_id(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 2**63:
        raise argparse.ArgumentTypeError(f"must be a key id like 12, got {text!r}")
    return int(text)


def parser() -> argparse.ArgumentParser:
    root = Parser(
        prog="python -m api",
        description="The HTTP API of runtime schedules, and its keys.",
        epilog=EXIT_CODES,
    )
    root.add_argument("--debug", action="store_true", help="show tracebacks")
    commands = root.add_subparsers(dest="command", required=True, parser_class=Parser)
    commands.add_parser("serve", help="serve the API on API_HOST:API_PORT (default 127.0.0.1:8088)")
    keys = commands.add_parser("keys", help="create, list or revoke API keys").add_subparsers(
        dest="keys_command", required=True, parser_class=Parser
    )
    create = keys.add_parser("create", help="create a key; it is printed this once")
    scope = create.add_mutually_exclusive_group(required=True)
    scope.add_argument("--tenant", help="the tenant whose schedules the key sees")
    scope.add_argument("--operator", action="store_true", help="the operator role: every tenant")
    create.add_argument("--note", default="", help="what the key is for")
    keys.add_parser("list", help="every key: id, tenant or operator, created, revoked")
    revoke = keys.add_parser("revoke", help="revoke a key: it answers 401 from now on")
    revoke.add_argument("id", type=_key_id, metavar="ID")
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        from api.settings import load_api_settings

        settings = load_api_settings()
        if args.command == "serve":
            return _serve(settings)
        return asyncio.run(_keys(args, settings.database_conninfo))
    except SchedulerError as exc:
        if args.debug:
            raise
        print(f"error: {redact.scrub(str(exc))}", file=sys.stderr)
        return exc.exit_code


def _serve(settings) -> int:
    import uvicorn

    from api.app import create_app
    from worker.logs import configure_logging

    configure_logging(settings.log_format)
    uvicorn.run(
        create_app(settings),
        host=settings.api_host,
        port=settings.api_port,
        log_config=None,  # the process's logging (worker.logs), not uvicorn's own
        proxy_headers=False,
    )
    return 0


async def _keys(args: argparse.Namespace, url: str) -> int:
    from api import keys

    if args.keys_command == "create":
        tenant = None if args.operator else args.tenant
        info, key = await keys.create(url, tenant=tenant, by=getpass.getuser(), note=args.note)
        scope = f"tenant {info.tenant}" if info.tenant else "operator (every tenant)"
        print(f"created key {info.id} for {scope}; shown this once, store it now:")
        print(key)
    elif args.keys_command == "list":
        for info in await keys.list_keys(url):
            scope = f"tenant {info.tenant}" if info.tenant else "operator"
            state = f"revoked {info.revoked_at:%Y-%m-%dT%H:%M:%SZ}" if info.revoked_at else "active"
            print(
                f"{info.id}\t{scope}\t{state}\tcreated {info.created_at:%Y-%m-%dT%H:%M:%SZ} "
                f"by {info.created_by or '-'}\t{info.note}"
            )
    else:
        info = await keys.revoke(url, args.id, now=datetime.now(UTC))
        print(f"revoked key {info.id} at {info.revoked_at:%Y-%m-%dT%H:%M:%SZ}")
    return 0


if __name__ == "__main__":
    exit_process(main())
