"""`tenants trigger | backfill`: record slots for the dispatcher to start."""

from __future__ import annotations

import argparse

from schedules import tenants
from schedules.cli.context import Context
from schedules.cli.tenants.common import add_by, add_id, at, subcommand, url, when, who


def configure(commands: argparse._SubParsersAction) -> None:
    trigger = subcommand(commands, "trigger", "run a schedule once now (a manual run)", _trigger)
    add_id(trigger)
    add_by(trigger)

    backfill = subcommand(
        commands, "backfill", "run a schedule's past fire times in a range again", _backfill
    )
    add_id(backfill)
    backfill.add_argument("--start", required=True, metavar="TIME", help="from (inclusive)")
    backfill.add_argument("--end", required=True, metavar="TIME", help="to (exclusive), past")
    backfill.add_argument("--dry-run", action="store_true", help="list them; record nothing")
    add_by(backfill)


async def _trigger(args: argparse.Namespace, ctx: Context) -> int:
    done = await tenants.trigger(url(ctx), args.id, by=who(args))
    zone = done.schedule.timezone
    for intent in done.recorded:
        print(f"recorded {intent.workflow_id} ({at(intent.scheduled_at, zone)}) for the dispatcher")
    for slot in done.already:
        print(f"already recorded: {at(slot, zone)}")
    return 0


async def _backfill(args: argparse.Namespace, ctx: Context) -> int:
    schedule = await tenants.get(url(ctx), args.id)
    start = when(args.start, schedule.timezone, "--start")
    end = when(args.end, schedule.timezone, "--end")
    done = await tenants.backfill(url(ctx), args.id, start, end, dry_run=args.dry_run, by=who(args))
    zone = schedule.timezone
    if args.dry_run:
        for slot in done.already:
            print(f"would record {at(slot, zone)}")
        print(f"{len(done.already)} fire time(s); nothing recorded (--dry-run)")
        return 0
    for intent in done.recorded:
        print(f"recorded {intent.workflow_id} ({at(intent.scheduled_at, zone)})")
    for slot in done.already:
        print(f"already recorded: {at(slot, zone)}")
    print(f"{len(done.recorded)} recorded, {len(done.already)} already recorded")
    return 0
