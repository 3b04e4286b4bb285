"""`tenants limits set | show | clear TENANT`: a tenant's own dispatch limits and weight."""

from __future__ import annotations

import argparse

from schedules import tenants
from schedules.cli.context import Context
from schedules.cli.tenants.common import (
    add_by,
    add_id,
    say,
    subcommand,
    tenant_action,
    tenant_group,
    url,
    who,
)

LIMITS_EXIT_CODES = (
    "exit codes: 0 done; 1 PostgreSQL unreachable; 2 bad input (a limit or weight that is "
    "not a positive whole number, none given); nothing is written unless the exit code is 0"
)


def configure(commands: argparse._SubParsersAction) -> None:
    actions = tenant_group(
        commands,
        "limits",
        "a tenant's limits on runs in flight and starts per minute, and its weight",
        "A tenant's own dispatch settings: at most MAX_IN_FLIGHT runs in flight, at most "
        "MAX_PER_MINUTE slots started a minute (a slot past either is deferred until "
        "the limit allows, not lost), and WEIGHT slots per round of the dispatcher's "
        "round-robin across tenants. A limit not set takes the operator's default "
        "(RUNTIME_TENANT_MAX_IN_FLIGHT, RUNTIME_TENANT_MAX_PER_MINUTE; unset: none).",
        LIMITS_EXIT_CODES,
    )
    set_ = tenant_action(actions, "set", "set some of a tenant's limits", _set, LIMITS_EXIT_CODES)
    set_.add_argument("--max-in-flight", type=int, metavar="N", help="runs in flight at most")
    set_.add_argument("--max-per-minute", type=int, metavar="N", help="slots started a minute")
    set_.add_argument("--weight", type=int, metavar="N", help="slots per round (default 1)")
    add_by(set_)
    tenant_action(actions, "show", "a tenant's limits and runs in flight", _show)
    clear = tenant_action(
        actions, "clear", "back to the defaults and weight 1", _clear, LIMITS_EXIT_CODES
    )
    add_by(clear)

    after = subcommand(
        commands,
        "pause-after",
        "pause a schedule after N consecutive failed slots (off: never)",
        _pause_after,
        LIMITS_EXIT_CODES,
    )
    add_id(after)
    after.add_argument("failures", type=_failures, metavar="N|off")
    add_by(after)


async def _set(args: argparse.Namespace, ctx: Context) -> int:
    found = await tenants.set_limits(
        url(ctx),
        args.tenant,
        max_in_flight=args.max_in_flight,
        max_per_minute=args.max_per_minute,
        weight=args.weight,
        by=who(args),
    )
    say(_line(found, ctx))
    return 0


def _failures(text: str) -> int | None:
    """An argparse type: a whole number, or `off`."""
    if text == "off":
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number or off, got {text!r}") from None


async def _pause_after(args: argparse.Namespace, ctx: Context) -> int:
    await tenants.set_pause_after_failures(url(ctx), args.id, args.failures, by=who(args))
    what = "never" if args.failures is None else f"after {args.failures} consecutive failed slots"
    say(f"rt-{args.id} pauses {what}")
    return 0


async def _show(args: argparse.Namespace, ctx: Context) -> int:
    say(_line(await tenants.limits(url(ctx), args.tenant), ctx))
    return 0


async def _clear(args: argparse.Namespace, ctx: Context) -> int:
    say(_line(await tenants.clear_limits(url(ctx), args.tenant, by=who(args)), ctx))
    return 0


def _line(found: tenants.TenantLimits, ctx: Context) -> str:
    """`acme: max in flight 2, max per minute default (none), weight 1; 2 in flight, 3
    schedule(s) deferred`."""
    settings = ctx.settings

    def shown(own: int | None, default: int | None) -> str:
        if own is not None:
            return str(own)
        return f"default ({default if default is not None else 'none'})"

    return (
        f"{found.tenant}: max in flight "
        f"{shown(found.max_in_flight, settings.runtime_tenant_max_in_flight)}, max per minute "
        f"{shown(found.max_per_minute, settings.runtime_tenant_max_per_minute)}, weight "
        f"{found.weight}; {found.in_flight} in flight, {found.deferred} schedule(s) deferred"
    )
