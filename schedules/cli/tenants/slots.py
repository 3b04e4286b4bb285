"""`tenants trigger | backfill`: run a slot now, or record past slots for the dispatcher."""

from __future__ import annotations

import argparse
import time

from activities.runtime.models import RuntimeRunResult
from schedules import tenants
from schedules.cli.context import Context, add_timeout
from schedules.cli.tenants.common import add_by, add_id, at, say, subcommand, url, when, who
from schedules.cli.wait import WAITED_EXIT, outcome_line, print_summary
from schedules.server.runs import DEFAULT_WAIT_SECONDS, wait_for_run

TRIGGER_EXIT_CODES = (
    "exit codes: 0 the run started; 1 PostgreSQL or Temporal unreachable (nothing recorded "
    "if Temporal could not be reached first; a run recorded and not started is started by "
    "the dispatcher's next tick, as the message says), or a manual run of this second "
    f"was triggered already; 2 bad input (an unknown or deleted schedule id); {WAITED_EXIT}"
)


def configure(commands: argparse._SubParsersAction) -> None:
    trigger = subcommand(commands, "trigger", "run a schedule once now (a manual run)", _trigger)
    trigger.epilog = TRIGGER_EXIT_CODES
    trigger.description = (
        "Run the schedule once now, paused or not, as a manual run of the current second: "
        "the slot is recorded (its intent) and its run started at once on the fleet's task "
        "queue. With --wait, also wait until the run has finished and print one line: its "
        "slot in the schedule's zone and UTC, origin, status, duration and counts, and its "
        "error if it failed."
    )
    add_id(trigger)
    add_by(trigger)
    trigger.add_argument(
        "--wait",
        action="store_true",
        help="wait until the run has finished, then print its slot, origin, status, "
        "duration and counts (and its error if it failed)",
    )
    add_timeout(
        trigger,
        None,
        f"with --wait, how long to wait for the run to finish (default "
        f"{DEFAULT_WAIT_SECONDS:g}); it goes on after",
    )

    backfill = subcommand(
        commands, "backfill", "run a schedule's past fire times in a range again", _backfill
    )
    add_id(backfill)
    backfill.add_argument("--start", required=True, metavar="TIME", help="from (inclusive)")
    backfill.add_argument("--end", required=True, metavar="TIME", help="to (exclusive), past")
    backfill.add_argument("--dry-run", action="store_true", help="list them; record nothing")
    add_by(backfill)


async def _trigger(args: argparse.Namespace, ctx: Context) -> int:
    client = await ctx.client()  # Temporal first: unreachable, nothing is recorded
    deadline = time.monotonic() + (args.timeout or DEFAULT_WAIT_SECONDS)
    done = await tenants.trigger(
        url(ctx), args.id, by=who(args), client=client, task_queue=ctx.settings.temporal_task_queue
    )
    schedule, zone = done.schedule, done.schedule.timezone
    if not done.recorded:
        print(
            f"not started: a manual run of {schedule.ledger_name} at {at(done.already[0], zone)} "
            "was triggered already (one a second); `tenants runs` shows it"
        )
        return 1
    (intent,) = done.recorded
    what = f"{schedule.ledger_name} {schedule.tenant}/{schedule.name} at {at(intent.scheduled_at, zone)}"
    if done.not_started is not None:
        say(
            f"recorded {intent.workflow_id} ({what}), not started now ({done.not_started}): "
            "the dispatcher's next tick starts it"
        )
        return 1
    how = "started" if done.started else "started by the dispatcher"
    say(f"{how} {intent.workflow_id}: {what}, manual", flush=True)
    if schedule.paused:
        say(f"note: the schedule is {tenants.paused_text(schedule)}; a trigger runs anyway")
    if not args.wait:
        return 0
    outcome = await wait_for_run(
        client, intent.workflow_id, None, intent.scheduled_at, "manual", deadline,
        retry=ctx.retry, result_type=RuntimeRunResult,
    )  # fmt: skip
    say(outcome_line(outcome, zone))
    return print_summary([outcome], schedule.ledger_name, args.timeout or DEFAULT_WAIT_SECONDS)


async def _backfill(args: argparse.Namespace, ctx: Context) -> int:
    schedule = await tenants.get(url(ctx), args.id)
    start = when(args.start, schedule.timezone, "--start")
    end = when(args.end, schedule.timezone, "--end")
    done = await tenants.backfill(url(ctx), args.id, start, end, dry_run=args.dry_run, by=who(args))
    zone = schedule.timezone
    if args.dry_run:
        for slot in done.would_run:
            print(f"would record {at(slot, zone)}")
        for slot in done.already:
            print(f"already recorded: {at(slot, zone)}")
        print(
            f"{len(done.would_run)} would be recorded, {len(done.already)} already recorded; "
            "nothing recorded (--dry-run)"
        )
        return 0
    for intent in done.recorded:
        print(f"recorded {intent.workflow_id} ({at(intent.scheduled_at, zone)})")
    for slot in done.already:
        print(f"already recorded: {at(slot, zone)}")
    print(f"{len(done.recorded)} recorded, {len(done.already)} already recorded")
    return 0
