"""`python -m schedules trigger JOB`: start one run now, check it started, optionally wait."""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime

from core.text import printable
from schedules.catalog.times import local_text, utc_text
from schedules.cli import context as cli
from schedules.cli.wait import WAITED_EXIT, outcome_line, print_summary
from schedules.server.actions import trigger
from schedules.server.runs import DEFAULT_WAIT_SECONDS, wait_for_run
from schedules.server.state import usable_state

NAME = "trigger"
HELP = "start one run now and check that it started"
DESCRIPTION = (
    "Start one run of the job now, overlap ALLOW_ALL (it runs beside one in flight), and "
    "wait until Temporal reports it started. Two triggers in the same second share a "
    "workflow id and Temporal drops the second: that is reported, with exit 1. With "
    "--wait, also wait until the run has finished and print one line: its slot in the "
    "job's time zone and UTC, its origin (manual), status, duration and counts, and its "
    "error if it failed."
)
# How long `trigger` waits for its run to start (the server drops a same-second trigger).
START_TIMEOUT = 10.0
EXIT_CODES = (
    "exit codes: 0 the run started; 1 it did not start within --timeout (Temporal drops a "
    "second trigger in the same second), Temporal unreachable, the job has no schedule; "
    f"{cli.COMMON_EXIT}; {WAITED_EXIT}"
)


def configure(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = cli.command(subparsers, NAME, HELP, DESCRIPTION, EXIT_CODES)
    cli.add_job(parser)
    parser.add_argument(
        "--wait",
        action="store_true",
        help="wait until the run has finished, then print its slot, origin, status, "
        "duration and counts (and its error if it failed)",
    )
    cli.add_timeout(
        parser,
        None,
        f"how long to wait for the run to start (default {START_TIMEOUT:g}), or with "
        f"--wait for it to finish (default {DEFAULT_WAIT_SECONDS:g})",
    )
    cli.add_cluster_wait(parser)
    return parser


async def run(args: argparse.Namespace, ctx: cli.Context) -> int:
    job = cli.catalog_job(args, args.job)
    timeout = args.timeout
    if timeout is None:
        timeout = DEFAULT_WAIT_SECONDS if args.wait else START_TIMEOUT
    client = await ctx.client()
    state = await usable_state(client, job.id, retry=ctx.retry)
    at = datetime.now(UTC)
    deadline = time.monotonic() + timeout
    action = await trigger(client, job.id, at, timeout=min(timeout, START_TIMEOUT), retry=ctx.retry)
    workflow_id, run_id = action.action.workflow_id, action.action.first_execution_run_id
    print(
        f"started {workflow_id} (run {run_id}): "
        f"{job.id} at {local_text(at, job.timezone)} ({utc_text(at)}), overlap ALLOW_ALL",
        flush=True,
    )
    if state.paused:
        print(
            printable(
                f"note: the schedule is paused ({state.note or 'no note'}); a trigger runs anyway"
            )
        )
    if not args.wait:
        return 0
    outcome = await wait_for_run(
        client, workflow_id, run_id, action.scheduled_at, "manual", deadline, retry=ctx.retry
    )
    print(outcome_line(outcome, job.timezone))
    return print_summary([outcome], job.id, timeout)
