"""`tenants notify set | show | clear TENANT`: where a tenant's notices go (docs/notices.md)."""

from __future__ import annotations

import argparse

from schedules import tenants
from schedules.cli.context import Context
from schedules.cli.tenants.common import add_by, say, tenant_action, tenant_group, url, who

NOTIFY_EXIT_CODES = (
    "exit codes: 0 done; 1 PostgreSQL unreachable; 2 bad input (a webhook that is not an "
    "http(s) URL, an email that is not one address, neither given, a tenant without "
    "channels for show); nothing is written unless the exit code is 0"
)


def configure(commands: argparse._SubParsersAction) -> None:
    actions = tenant_group(
        commands,
        "notify",
        "where a tenant's notices of failed, paused, lost and late slots go",
        "A tenant's notice channels: a webhook (each call signed per Standard Webhooks "
        "with the tenant's secret, whsec_..., printed once when it is made) and email "
        "addresses. Its runtime schedules' notices go there, and those of catalog jobs "
        "whose `notify` names it. See docs/notices.md.",
        NOTIFY_EXIT_CODES,
    )
    set_ = tenant_action(
        actions, "set", "send a tenant's notices here (both replaced)", _set, NOTIFY_EXIT_CODES
    )
    set_.add_argument("--webhook", metavar="URL", help="POST each notice here, signed")
    set_.add_argument(
        "--email", action="append", default=[], metavar="ADDR", help="email it here (repeat)"
    )
    set_.add_argument(
        "--rotate-secret", action="store_true", help="make a new signing secret (printed)"
    )
    add_by(set_)
    show = tenant_action(actions, "show", "a tenant's notice channels", _show, NOTIFY_EXIT_CODES)
    show.add_argument(
        "--secret", action="store_true", help="print the signing secret too (for a receiver)"
    )
    tenant_action(actions, "clear", "send a tenant no more notices", _clear)


async def _set(args: argparse.Namespace, ctx: Context) -> int:
    found = await tenants.set_notices(
        url(ctx),
        args.tenant,
        webhook_url=args.webhook,
        emails=args.email,
        rotate_secret=args.rotate_secret,
        by=who(args),
    )
    say(_line(found, reveal=found.new_secret))
    return 0


async def _show(args: argparse.Namespace, ctx: Context) -> int:
    say(_line(await tenants.notices(url(ctx), args.tenant), reveal=args.secret))
    return 0


async def _clear(args: argparse.Namespace, ctx: Context) -> int:
    gone = await tenants.clear_notices(url(ctx), args.tenant)
    say(f"{args.tenant}: " + ("no more notices" if gone else "had no notice channels"))
    return 0


def _line(found: tenants.NoticeChannels, *, reveal: bool) -> str:
    """`acme: webhook https://hooks.example.com/..., email ops@acme.test; secret hidden
    (show --secret prints it)`."""
    channels = []
    if found.webhook_shown:
        channels.append(f"webhook {found.webhook_shown}")
    if found.emails:
        channels.append("email " + ", ".join(found.emails))
    secret = f"secret {found.secret}" if reveal else "secret hidden (show --secret prints it)"
    return f"{found.tenant}: {', '.join(channels)}; {secret}"
