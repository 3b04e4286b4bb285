"""What the `tenants` subcommands share: exit codes, arguments, and how a schedule reads."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any

from core.text import printable
from schedules.catalog.problems import short
from schedules.catalog.times import local_text, parse_time, utc_text
from schedules.cli.context import BadInputError, Context, database_url, operator, shown_text
from schedules.tenants import Quotas, Schedule, paused_text
from schedules.tenants.values import JsonTextError, parse_json

EXIT_CODES = (
    "exit codes: 0 done; 1 PostgreSQL unreachable, a version conflict (someone changed the "
    "schedule first: read it again), a create or import naming an existing schedule with "
    "another definition; 2 bad input (usage, an invalid field, a quota, an unknown "
    "schedule id); nothing is written unless the exit code is 0"
)


def subcommand(
    commands: argparse._SubParsersAction,
    name: str,
    help: str,
    handler: Any,
    exit_codes: str = EXIT_CODES,
) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        name, help=help, description=help[0].upper() + help[1:] + ".", epilog=exit_codes
    )
    parser.set_defaults(tenants_handler=handler)
    return parser


def tenant_group(
    commands: argparse._SubParsersAction, name: str, help: str, description: str, exit_codes: str
) -> argparse._SubParsersAction:
    """`tenants NAME ACTION TENANT ...`: a group of a tenant's settings; its actions are
    added with `tenant_action`."""
    parser = commands.add_parser(name, help=help, description=description, epilog=exit_codes)
    return parser.add_subparsers(dest=f"{name}_command", required=True, metavar="ACTION")


def tenant_action(
    actions: argparse._SubParsersAction,
    name: str,
    help: str,
    handler: Any,
    exit_codes: str = EXIT_CODES,
) -> argparse.ArgumentParser:
    """An action of a `tenant_group` (`set`, `show`, `clear`), on the tenant it names."""
    parser = subcommand(actions, name, help, handler, exit_codes)
    parser.add_argument("tenant", metavar="TENANT")
    return parser


def add_id(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", type=schedule_id, metavar="ID", help="schedule id (rt-ID or ID)")


def add_by(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--by",
        default=None,
        type=shown_text,
        metavar="WHO",
        help="who makes the change (default: login name)",
    )


def schedule_id(text: str) -> int:
    """An argparse type: `12` or `rt-12`."""
    digits = text.removeprefix("rt-")
    if not digits.isdigit() or not 0 < int(digits) < 2**63:
        raise argparse.ArgumentTypeError(f"must be a schedule id like 12 or rt-12, got {text!r}")
    return int(digits)


def who(args: argparse.Namespace) -> str:
    return operator(args.by)


def url(ctx: Context) -> str:
    return database_url(ctx)


def quotas(ctx: Context) -> Quotas:
    return Quotas.of(ctx.settings)


def when(text: str, timezone: str, option: str) -> datetime:
    """An operator's time in the schedule's zone (unless it names an offset)."""
    try:
        return parse_time(text, timezone, datetime.now(UTC))
    except ValueError as exc:
        raise BadInputError(f"{option}: {exc}") from None


def _json(text: str, kind: type, name: str) -> Any:
    """JSON that can be stored (`schedules.tenants.values`): a part that cannot, a depth
    past the limit or a number of 5,000 digits is refused naming it, as a file's line is."""
    try:
        value = parse_json(text)
    except JsonTextError as exc:
        raise argparse.ArgumentTypeError(f"must be a JSON {name}: {exc}") from None
    if not isinstance(value, kind):
        raise argparse.ArgumentTypeError(f"must be a JSON {name}, got {short(text)}")
    return value


def params_json(text: str) -> dict[str, Any]:
    """An argparse type: a JSON object."""
    return _json(text, dict, "object")


def json_list(text: str) -> list[Any]:
    """An argparse type: a JSON array."""
    return _json(text, list, "array")


def entry(schedule: Schedule) -> dict[str, Any]:
    """A schedule as one JSON object (`show --json`, a line of `list --json`)."""
    data = schedule.model_dump(mode="json")
    return {"id": schedule.id, "ledger_name": schedule.ledger_name, **data}


def print_line(data: Any) -> None:
    print(json.dumps(data, default=str, separators=(",", ":")))


def at(instant: datetime | None, timezone: str) -> str:
    if instant is None:
        return "-"
    return f"{local_text(instant, timezone)} ({utc_text(instant)})"


def say(text: str, **options: Any) -> None:
    """Print a line that holds stored text (a note, a name, who), every character that is
    not printable escaped (`core.text.printable`): rows written before writes refused
    control characters, or by another tool, cannot act on the operator's terminal."""
    print(printable(text), **options)


def summary(schedule: Schedule) -> str:
    """`rt-12 acme/weekly-report v3: test-noop '0 8 * * 1' America/New_York, next ...`,
    escaped (`say`)."""
    state = (
        "deleted"
        if schedule.deleted_at is not None
        else (paused_text(schedule) if schedule.paused else f"next {at(schedule.next_fire_at, schedule.timezone)}")
    )  # fmt: skip
    return printable(
        f"{schedule.ledger_name} {schedule.tenant}/{schedule.name} v{schedule.version}: "
        f"{schedule.kind} {schedule.cron!r} {schedule.timezone}, {state}"
    )
