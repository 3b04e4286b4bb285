"""`tenants show | list | next | explain | runs`: reads; `--json` prints JSON (Lines for
`list` and `runs`, one object a line)."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC

from schedules import tenants
from schedules.catalog.durations import format_duration
from schedules.cli.context import Context, count
from schedules.cli.tenants.common import (
    add_id,
    at,
    entry,
    print_line,
    say,
    subcommand,
    summary,
    url,
    when,
)
from schedules.record import DatabaseUnavailableError

EXPLAIN_EXIT_CODES = (
    "exit codes (the catalog's `explain`): 0 it ran (completed); 1 it did not, and why is "
    "printed; 2 cannot tell (PostgreSQL unreachable) or bad input (an unknown schedule id, "
    "a time it cannot read)"
)


def configure(commands: argparse._SubParsersAction) -> None:
    show = subcommand(commands, "show", "one schedule: its fields, state and recent changes", _show)
    add_id(show)
    show.add_argument("--json", action="store_true", help="one JSON object")

    listing = subcommand(commands, "list", "live schedules, filtered, by id", _list)
    listing.add_argument("--tenant")
    listing.add_argument("--kind")
    state = listing.add_mutually_exclusive_group()
    state.add_argument("--paused", action="store_const", const=True, dest="paused")
    state.add_argument("--active", action="store_const", const=False, dest="paused")
    listing.add_argument("--due", action="store_true", help="next slot at or before now")
    listing.add_argument("--limit", type=count, default=100, help="at most this many (100)")
    listing.add_argument("--after", type=int, default=0, metavar="ID", help="page on after ID")
    listing.add_argument("--json", action="store_true", help="JSON Lines: one schedule a line")

    upcoming = subcommand(commands, "next", "the next fire times, DST cases flagged", _next)
    add_id(upcoming)
    upcoming.add_argument("-n", type=count, default=10, help="how many (10)")
    upcoming.add_argument("--json", action="store_true", help="JSON Lines")

    explain = subcommand(
        commands, "explain", "what happened to one slot, and why", _explain, EXPLAIN_EXIT_CODES
    )
    add_id(explain)
    explain.add_argument("slot", metavar="TIME", help="the slot, in the schedule's zone or UTC")
    explain.add_argument("--json", action="store_true", help="one JSON object")

    runs = subcommand(commands, "runs", "the schedule's runs from the ledger, newest first", _runs)
    add_id(runs)
    runs.add_argument("-n", type=count, default=20, help="how many (20)")
    runs.add_argument("--json", action="store_true", help="JSON Lines: one run a line")


async def _show(args: argparse.Namespace, ctx: Context) -> int:
    schedule = await tenants.get(url(ctx), args.id)
    log = await tenants.changes(url(ctx), args.id, limit=10)
    if args.json:
        print_line(entry(schedule) | {"changes": log})
        return 0
    print(summary(schedule))
    say(f"  params {schedule.params}; catchup {schedule.catchup}; shard {schedule.shard}")
    print(f"  timing since {at(schedule.timing_since, schedule.timezone)}")
    for dep in schedule.depends_on:
        say(
            f"  depends on {dep.upstream}: slots {dep.slots}, within "
            f"{format_duration(dep.within)}, on failure {dep.on_failure}"
        )
    for change in log:
        say(f"  {change['at']:%Y-%m-%dT%H:%M:%SZ} {change['action']} by {change['by'] or '-'}")
    return 0


async def _list(args: argparse.Namespace, ctx: Context) -> int:
    page = await tenants.list_schedules(
        url(ctx),
        tenant=args.tenant,
        kind=args.kind,
        paused=args.paused,
        due=args.due,
        after=args.after,
        limit=args.limit,
    )
    for schedule in page.schedules:
        print_line(entry(schedule)) if args.json else print(summary(schedule))
    if page.next_after is not None and not args.json:
        print(f"(more: --after {page.next_after})")
    return 0


async def _next(args: argparse.Namespace, ctx: Context) -> int:
    """A paused schedule says so first (by whom and why): it runs none of the times until
    resumed; `--json` gives each line its `paused`."""
    schedule, times = await tenants.next_times(url(ctx), args.id, args.n)
    paused = {"by": schedule.paused_by, "note": schedule.note} if schedule.paused else None
    if paused and not args.json:
        say(
            f"{tenants.paused_text(schedule)}: none of these runs until it is resumed, and a resume "
            "runs the first of them after it"
        )
    for fire in times:
        if args.json:
            at_utc = fire.at.astimezone(UTC).isoformat()
            print_line({"at": at_utc, "dst": fire.dst, "calendar": fire.calendar, "paused": paused})
        else:
            notes = "".join(f"  [{note}]" for note in (fire.dst, fire.calendar) if note)
            print(at(fire.at, schedule.timezone) + notes)
    return 0


async def _explain(args: argparse.Namespace, ctx: Context) -> int:
    """The catalog's `explain` exit codes: 0 it ran, 1 it did not, 2 cannot tell or bad
    input."""
    try:
        schedule = await tenants.get(url(ctx), args.id)
        slot = when(args.slot, schedule.timezone, "TIME")
        told = await tenants.explain(url(ctx), args.id, slot)
    except DatabaseUnavailableError as exc:
        print(f"error: cannot tell: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print_line(
            {
                "schedule": told.schedule.id,
                "slot": slot.isoformat(),
                "fire_time": told.fire_time,
                "workflow_id": told.workflow_id,
                "intent": told.intent,
                "execution": told.execution,
                "ran": told.ran,
                "verdict": told.verdict,
            }
        )
    else:
        say(f"{told.workflow_id} ({at(slot, schedule.timezone)}): {told.verdict}")
    return told.exit_code


async def _runs(args: argparse.Namespace, ctx: Context) -> int:
    schedule = await tenants.get(url(ctx), args.id)
    rows = await tenants.runs(url(ctx), args.id, limit=args.n)
    for row in rows:
        if args.json:
            print_line(row)
        else:
            took = (
                f" in {(row['finished_at'] - row['started_at']).total_seconds():.1f}s"
                if row["finished_at"] and row["started_at"]
                else ""
            )
            print(
                f"{at(row['scheduled_at'], schedule.timezone)} {row['origin']} {row['status']}{took}"
            )
    if not rows and not args.json:
        print(f"{schedule.ledger_name}: no runs recorded")
    return 0
