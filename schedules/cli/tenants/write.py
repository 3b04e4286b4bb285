"""`tenants create | update | pause | resume | delete`: the writes, each one line of result."""

from __future__ import annotations

import argparse
from typing import Any

from schedules import tenants
from schedules.cli.context import Context
from schedules.cli.tenants.common import (
    add_by,
    add_id,
    json_list,
    params_json,
    quotas,
    subcommand,
    summary,
    url,
    who,
)

# The options of `create` and `update` that set a definition field, by field.
_FIELDS = {
    "kind": "--kind",
    "cron": "--cron",
    "timezone": "--timezone",
    "params": "--params",
    "catchup": "--catchup",
    "max_missed": "--max-missed",
    "start_at": "--start-at",
    "end_at": "--end-at",
    "calendar": "--calendar",
    "on_holiday": "--on-holiday",
    "depends_on": "--depends-on",
}


def _definition_options(parser: argparse.ArgumentParser, required: bool) -> None:
    parser.add_argument("--kind", required=required, help="runtime kind")
    parser.add_argument("--cron", required=required, help="cron, minute granularity")
    parser.add_argument("--timezone", required=required, help="IANA time zone")
    parser.add_argument("--params", type=params_json, metavar="JSON", help="the kind's params")
    parser.add_argument("--catchup", help="skip | latest | all (with --max-missed)")
    parser.add_argument("--max-missed", type=int, metavar="N")
    parser.add_argument("--start-at", metavar="TIME", help="ISO time with offset")
    parser.add_argument("--end-at", metavar="TIME", help="ISO time with offset")
    parser.add_argument(
        "--calendar",
        metavar="NAME",
        help="business days: a holidays-package market or country (NYSE, US, GB-ENG) or one "
        "of the catalog's [calendars]",
    )
    parser.add_argument(
        "--on-holiday",
        metavar="RULE",
        help="skip (default) | following | preceding | modified_following: a non-business day's run",
    )
    parser.add_argument(
        "--depends-on",
        type=json_list,
        metavar="JSON",
        help='upstream slots to wait for: [{"job" or "schedule": ..., "slots": "same" | '
        '"window" | "latest", "within": "2h", "on_failure": "wait" | "skip" | "run"}] '
        "(docs/dependencies.md)",
    )


_CLEARABLE = ("max_missed", "start_at", "end_at", "params", "calendar", "depends_on")


def _given(args: argparse.Namespace) -> dict[str, Any]:
    given = {f: getattr(args, f) for f in _FIELDS if getattr(args, f) is not None}
    for name in getattr(args, "clear", ()):
        given[name] = {"params": {}, "depends_on": []}.get(name)
        if name == "calendar":
            given["on_holiday"] = None
    return given


def configure(commands: argparse._SubParsersAction) -> None:
    create = subcommand(
        commands, "create", "create a schedule (idempotent per tenant and name)", _create
    )
    create.add_argument("--tenant", required=True)
    create.add_argument("--name", required=True)
    _definition_options(create, required=True)
    create.add_argument("--paused", action="store_true", help="create it paused (--note why)")
    create.add_argument("--note", default="", help="why it is created paused")
    add_by(create)

    update = subcommand(
        commands, "update", "change fields of a schedule at a known version", _update
    )
    add_id(update)
    update.add_argument("--version", type=int, required=True, help="the version you read")
    _definition_options(update, required=False)
    update.add_argument(
        "--clear",
        action="append",
        default=[],
        choices=_CLEARABLE,
        help="unset an optional field (repeatable; params: back to the kind's defaults)",
    )
    add_by(update)

    pause = subcommand(commands, "pause", "pause a schedule, saying why", _pause)
    add_id(pause)
    pause.add_argument("--note", required=True, metavar="TEXT", help="why (required)")
    pause.add_argument("--version", type=int, help="refuse unless at this version")
    add_by(pause)

    for name, handler, help in (
        ("resume", _resume, "lift a pause; fire times that passed meanwhile do not run"),
        ("delete", _delete, "delete a schedule (soft: a run in flight goes on)"),
    ):
        parser = subcommand(commands, name, help, handler)
        add_id(parser)
        if name == "resume":
            parser.add_argument("--note", metavar="TEXT", help="why (kept in its change log)")
        parser.add_argument("--version", type=int, help="refuse unless at this version")
        add_by(parser)


def _report(verb: str, outcome: tenants.Outcome) -> int:
    print(f"{verb if outcome.changed else 'unchanged'} {summary(outcome.schedule)}")
    return 0


async def _create(args: argparse.Namespace, ctx: Context) -> int:
    data = {"tenant": args.tenant, "name": args.name, **_given(args), "paused": args.paused}
    if args.note:
        data["note"] = args.note
    outcome = await tenants.create(url(ctx), data, by=who(args), quotas=quotas(ctx))
    print(f"{'created' if outcome.changed else 'exists'} {summary(outcome.schedule)}")
    return 0


async def _update(args: argparse.Namespace, ctx: Context) -> int:
    outcome = await tenants.update(
        url(ctx), args.id, args.version, _given(args), by=who(args), quotas=quotas(ctx)
    )
    return _report("updated", outcome)


async def _pause(args: argparse.Namespace, ctx: Context) -> int:
    outcome = await tenants.pause(
        url(ctx), args.id, args.note, by=who(args), expected_version=args.version
    )
    return _report("paused", outcome)


async def _resume(args: argparse.Namespace, ctx: Context) -> int:
    outcome = await tenants.resume(
        url(ctx), args.id, note=args.note, by=who(args), expected_version=args.version
    )
    return _report("resumed", outcome)


async def _delete(args: argparse.Namespace, ctx: Context) -> int:
    outcome = await tenants.delete(url(ctx), args.id, by=who(args), expected_version=args.version)
    return _report("deleted", outcome)
