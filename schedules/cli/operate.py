"""Operator commands of `python -m schedules`: list, describe, next, trigger, backfill, pause, resume.

Importing this module registers them (`schedules.cli.context._EXTRA_COMMANDS`). Each handler
returns the exit code; errors it raises carry theirs (`SchedulerError.exit_code`):
0 done, 1 could not be carried out (a server unreachable, a trigger that did not start),
2 bad input (usage, an unknown job, a backfill larger than allowed without `--yes`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from core.errors import SchedulerError
from schedules import progress
from schedules.catalog.compile import intent_note
from schedules.catalog.model import JobSpec
from schedules.catalog.times import between, local_text, parse_time, upcoming, utc_text
from schedules.cli import context as cli
from schedules.cli.context import Context, add_cluster_wait, catalog_jobs, positive_seconds
from schedules.cli.format import (
    describe_entry,
    format_describe,
    format_list,
    format_next,
    list_entry,
    next_entry,
)
from schedules.server.runs import (
    DEFAULT_WAIT_SECONDS,
    EXIT_STILL_RUNNING,
    outcome_line,
    print_summary,
    run_ids,
    wait_for_run,
    wait_for_slots,
)
from schedules.server.state import (
    DatabaseUnavailableError,
    OperationError,
    backfill,
    execution_counts,
    last_runs,
    pause,
    recent_executions,
    resume,
    schedule_state,
    schedule_states,
    server_times,
    trigger,
    trigger_each,
    usable_state,
)

# Temporal buffers the starts of a trigger burst; past about a thousand it drops them.
BACKFILL_HARD_LIMIT = 1000
# How long `trigger` waits for its run to start (the server drops a same-second trigger).
START_TIMEOUT = 10.0

_COMMON = "2 bad input (usage, an invalid catalog, an unknown job id)"
EXIT_LIST = (
    "exit codes: 0 listed; 1 Temporal unreachable, or PostgreSQL unreachable (the "
    f"schedules are still listed, last runs shown as ?); {_COMMON}"
)
EXIT_DESCRIBE = (
    "exit codes: 0 described; 1 Temporal unreachable, or PostgreSQL unreachable (the "
    f"catalog entry and server state are still shown); {_COMMON}"
)
EXIT_NEXT = f"exit codes: 0 listed (no server is contacted); {_COMMON} or time"
_WAITED = (
    "with --wait: 0 every run completed or correctly did nothing (already completed, "
    "skipped by the job's policy); 1 a run failed (its error is printed); "
    f"{EXIT_STILL_RUNNING} not every run finished within --timeout (they go on: `python -m "
    "schedules runs JOB` follows them)"
)
EXIT_TRIGGER = (
    "exit codes: 0 the run started; 1 it did not start within --timeout (Temporal drops a "
    "second trigger in the same second), Temporal unreachable, the job has no schedule; "
    f"{_COMMON}; {_WAITED}"
)
EXIT_BACKFILL = (
    "exit codes: 0 the runs were requested (or there were none); 1 the server did not take "
    "the request up, Temporal unreachable, "
    f"the job has no schedule; {_COMMON}, a bad range, more runs than the maximum "
    f"without --yes; {_WAITED}"
)
EXIT_PAUSE = (
    "exit codes: 0 done; 1 it did not take effect, Temporal unreachable, the job has no "
    f"schedule; {_COMMON}"
)


class UnknownJobError(SchedulerError):
    """A job id the catalog does not have."""


class BadInputError(SchedulerError):
    """An argument the command cannot use (a time it cannot read, an empty range ...)."""


def _catalog(args: argparse.Namespace) -> dict[str, JobSpec]:
    return catalog_jobs(args.catalog, getattr(args, "job", None))


def _job(args: argparse.Namespace) -> JobSpec:
    jobs = _catalog(args)
    if args.job not in jobs:
        raise UnknownJobError(
            f"unknown job {args.job!r}; the catalog has: {', '.join(jobs) or 'no jobs'}"
        )
    return jobs[args.job]


def _time(text: str, job: JobSpec, now: datetime, option: str) -> datetime:
    try:
        return parse_time(text, job.timezone, now)
    except ValueError as exc:
        raise BadInputError(f"{option}: {exc}") from None


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2))


# --- handlers -----------------------------------------------------------------------------


async def _list(args: argparse.Namespace, ctx: Context) -> int:
    jobs = _catalog(args)
    states = await schedule_states(ctx, list(jobs))
    database_error = None
    try:
        runs = await last_runs(ctx.settings.database_url.get_secret_value(), list(jobs))
    except DatabaseUnavailableError as exc:
        runs, database_error = {}, str(exc)
    entries = [list_entry(job, states[job.id], runs.get(job.id)) for job in jobs.values()]
    if args.json:
        _print_json({"jobs": entries, "database_error": database_error})
    else:
        print(format_list(entries, database_ok=database_error is None))
    if database_error:
        print(f"error: {database_error}; last runs not shown", file=sys.stderr)
        return 1
    return 0


async def _describe(args: argparse.Namespace, ctx: Context) -> int:
    job = _job(args)
    state = await schedule_state(ctx, job.id)
    executions, record, database_error = None, None, None
    url = ctx.settings.database_url.get_secret_value()
    try:
        executions = await recent_executions(url, job.id)
        record = await execution_counts(url, job.id)
    except DatabaseUnavailableError as exc:
        database_error = str(exc)
    entry = describe_entry(job, state, executions, database_error, record)
    if args.json:
        _print_json(entry)
    else:
        print(format_describe(entry))
    if database_error:
        print(f"error: {database_error}; executions not shown", file=sys.stderr)
        return 1
    return 0


async def _next(args: argparse.Namespace, ctx: Context) -> int:
    job = _job(args)
    now = datetime.now(UTC)
    if not 1 <= args.n <= 1000:
        raise BadInputError(f"-n: must be between 1 and 1000, got {args.n}")
    if args.from_time:
        after = _time(args.from_time, job, now, "--from")
        times = upcoming(job, after - timedelta(microseconds=1), args.n)  # at or after
    else:
        after, times = now, upcoming(job, now, args.n)
    entry = next_entry(job, after, times)
    if args.json:
        _print_json(entry)
    else:
        print(format_next(entry))
    return 0


async def _trigger(args: argparse.Namespace, ctx: Context) -> int:
    job = _job(args)
    timeout = args.timeout
    if timeout is None:
        timeout = DEFAULT_WAIT_SECONDS if args.wait else START_TIMEOUT
    state = await usable_state(ctx, job.id)
    at = datetime.now(UTC)
    deadline = time.monotonic() + timeout
    action = await trigger(ctx, job.id, at, timeout=min(timeout, START_TIMEOUT))
    workflow_id, run_id = action.action.workflow_id, action.action.first_execution_run_id
    print(
        f"started {workflow_id} (run {run_id}): "
        f"{job.id} at {local_text(at, job.timezone)} ({utc_text(at)}), overlap ALLOW_ALL",
        flush=True,
    )
    if state.paused:
        print(f"note: the schedule is paused ({state.note or 'no note'}); a trigger runs anyway")
    if not args.wait:
        return 0
    outcome = await wait_for_run(ctx, workflow_id, run_id, action.scheduled_at, "manual", deadline)
    print(outcome_line(outcome, job.timezone))
    return print_summary([outcome], job.id, timeout)


async def _backfill(args: argparse.Namespace, ctx: Context) -> int:
    job = _job(args)
    now = datetime.now(UTC)
    start = _time(args.start, job, now, "--start")
    end = _time(args.end, job, now, "--end")
    if start >= end:
        raise BadInputError(f"--start {utc_text(start)} is not before --end {utc_text(end)}")
    if end > now:
        # Temporal starts a backfilled future time at once: work done for a slot whose time
        # has not come (invoices not yet due), and the slot then counts as done.
        which = "--start" if start > now else "--end"
        raise BadInputError(
            f"{which} {utc_text(start if start > now else end)} is after now "
            f"({utc_text(now)}): backfill runs past fire times only (the next ones run on "
            "schedule); give --end now or an earlier time"
        )
    if args.timeout is not None and not args.wait:
        raise BadInputError("--timeout: applies only with --wait (how long to wait for the runs)")
    timeout = args.timeout if args.timeout is not None else DEFAULT_WAIT_SECONDS
    maximum = args.max if args.max is not None else ctx.settings.backfill_max_runs
    times = between(job, start, end, BACKFILL_HARD_LIMIT + 1)
    span = f"[{utc_text(start)}, {utc_text(end)})"
    if not times:
        print(f"no fire times of {job.id} in {span}: nothing to start")
        return 0
    if len(times) > BACKFILL_HARD_LIMIT:
        raise BadInputError(
            f"backfill of {job.id!r} over {span} would start more than "
            f"{BACKFILL_HARD_LIMIT} runs, the most one backfill may start: split the range"
        )
    if len(times) > maximum and not args.yes:
        raise BadInputError(
            f"backfill of {job.id!r} over {span} would start {len(times)} runs, more than "
            f"the maximum of {maximum}: pass --yes (or --max {len(times)}) to start all "
            f"{len(times)}, or give a shorter range"
        )
    state = await usable_state(ctx, job.id)
    print(
        f"backfill of {job.id}: {len(times)} run(s) in {span}, first "
        f"{local_text(times[0], job.timezone)}, last {local_text(times[-1], job.timezone)}"
    )
    before = await run_ids(ctx, [f"{job.id}-{utc_text(t)}" for t in times]) if args.wait else {}
    if await server_times(ctx, job.id, start, end) == times:
        await backfill(ctx, job.id, start, end)
        how = "Temporal backfill"
    else:
        # The server's spec fires other times here (a DST-compiled spec covers a bounded
        # range of years; a catalog change not synced yet): start the job's own times.
        await trigger_each(ctx, job.id, times)
        how = "one trigger per fire time (the server's schedule fires other times here)"
    print(
        f"requested: {how}, overlap BUFFER_ALL (one after another); a slot that already "
        "completed is a recorded no-op"
    )
    if state.paused:
        print(f"note: the schedule is paused ({state.note or 'no note'}); backfills run anyway")
    if not args.wait:
        return 0
    sys.stdout.flush()
    outcomes = await wait_for_slots(
        ctx, job.id, job.timezone, times, before, timeout, progress.for_stream()
    )
    return print_summary(outcomes, job.id, timeout)


async def _pause(args: argparse.Namespace, ctx: Context) -> int:
    job = _job(args)
    if not args.note.strip():
        raise BadInputError("--note: say why the job is paused, e.g. --note 'ledger migration'")
    await usable_state(ctx, job.id)
    await pause(ctx, job.id, args.note)
    print(f"paused {job.id}: {args.note}")
    print(f"resume with: python -m schedules resume {job.id}")
    return 0


async def _resume(args: argparse.Namespace, ctx: Context) -> int:
    job = _job(args)
    state = await usable_state(ctx, job.id)
    if not state.paused:
        print(f"{job.id} is not paused; nothing changed")
        return 0
    # The note goes back to the job's intent, which the UI shows on the schedule's page.
    await resume(ctx, job.id, args.note or intent_note(job))
    print(f"resumed {job.id} (it was paused: {state.note or 'no note'})")
    if job.paused:
        print(
            f"warning: the catalog pauses {job.id}; the next sync pauses it again",
            file=sys.stderr,
        )
    return 0


# --- the parser ---------------------------------------------------------------------------


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _command(
    commands: argparse._SubParsersAction, name: str, help: str, description: str, epilog: str
) -> argparse.ArgumentParser:
    return commands.add_parser(name, help=help, description=description, epilog=epilog)


def add(commands: argparse._SubParsersAction) -> None:
    """Register the operator commands on the `python -m schedules` parser."""
    list_cmd = _command(
        commands,
        "list",
        "every job: schedule, next run, last run and its status, paused",
        "One line per catalog job: its schedule and time zone, the next run (from Temporal) "
        "in local time and UTC, the last run and its status (from PostgreSQL), and whether "
        "it is paused and why. A paused job shows 'paused: NOTE' instead of a next run; "
        "jobs without a schedule on the server show 'not synced'.",
        EXIT_LIST,
    )
    list_cmd.add_argument("--json", action="store_true", help="print one JSON document")
    list_cmd.set_defaults(handler=_list)

    describe_cmd = _command(
        commands,
        "describe",
        "one job: catalog entry, server state, recent runs and executions",
        "The job's catalog entry; its schedule on Temporal (paused and why, next runs - none "
        "while paused -, recent runs, counts, drift from the catalog); its record in "
        "PostgreSQL: how many runs completed, failed and were skipped, the newest success "
        "and failure, and the newest 10 executions.",
        EXIT_DESCRIBE,
    )
    describe_cmd.add_argument("job", metavar="ID", help="job id")
    describe_cmd.add_argument("--json", action="store_true", help="print one JSON document")
    describe_cmd.set_defaults(handler=_describe)

    next_cmd = _command(
        commands,
        "next",
        "a job's next fire times in local time and UTC, DST changes flagged",
        "The job's next fire times, computed from its catalog entry with the project's DST "
        "rules (a fixed-time job in the spring-forward gap runs at the first valid instant "
        "after it; in the repeated fall-back hour it runs once, at the first occurrence). "
        "No server is asked: a job the catalog pauses is said to be paused (its times are "
        "those after a resume); an operator's pause shows in `list` and `describe`.",
        EXIT_NEXT,
    )
    next_cmd.add_argument("job", metavar="ID", help="job id")
    next_cmd.add_argument(
        "-n", type=_count, default=5, metavar="N", help="how many (default 5, at most 1000)"
    )
    next_cmd.add_argument(
        "--from",
        dest="from_time",
        metavar="TIME",
        help="list the runs at or after TIME instead of now: 2027-03-13, 2027-03-13T02:00 "
        "(both in the job's time zone) or 2027-03-13T07:00:00Z",
    )
    next_cmd.add_argument("--json", action="store_true", help="print one JSON document")
    next_cmd.set_defaults(handler=_next)

    trigger_cmd = _command(
        commands,
        "trigger",
        "start one run now and check that it started",
        "Start one run of the job now, overlap ALLOW_ALL (it runs beside one in flight), and "
        "wait until Temporal reports it started. Two triggers in the same second share a "
        "workflow id and Temporal drops the second: that is reported, with exit 1. With "
        "--wait, also wait until the run has finished and print one line: its slot in the "
        "job's time zone and UTC, its origin (manual), status, duration and counts, and its "
        "error if it failed.",
        EXIT_TRIGGER,
    )
    trigger_cmd.add_argument("job", metavar="ID", help="job id")
    trigger_cmd.add_argument(
        "--wait",
        action="store_true",
        help="wait until the run has finished, then print its slot, origin, status, "
        "duration and counts (and its error if it failed)",
    )
    trigger_cmd.add_argument(
        "--timeout",
        type=positive_seconds,
        default=None,
        metavar="SECONDS",
        help=f"how long to wait for the run to start (default {START_TIMEOUT:g}), or with "
        f"--wait for it to finish (default {DEFAULT_WAIT_SECONDS:g})",
    )
    add_cluster_wait(trigger_cmd)
    trigger_cmd.set_defaults(handler=_trigger)

    backfill_cmd = _command(
        commands,
        "backfill",
        "start the runs of the fire times in a past range",
        "Start one run per fire time in [--start, --end) under the job's own DST rules "
        "(the range must end by now: future times run on schedule), "
        "overlap BUFFER_ALL (one after another; none is dropped). The count is printed "
        "first; more than the maximum (--max, else BACKFILL_MAX_RUNS, default 50) needs "
        f"--yes, and more than {BACKFILL_HARD_LIMIT} is refused. A slot that already "
        "completed is a recorded no-op. Times without a UTC offset are in the job's zone. "
        "With --wait, wait until every run has finished, printing one line per run as it "
        "ends (slot, origin, status, duration, counts, error) and a count at the end.",
        EXIT_BACKFILL,
    )
    backfill_cmd.add_argument("job", metavar="ID", help="job id")
    backfill_cmd.add_argument(
        "--start", required=True, metavar="TIME", help="first time (inclusive)"
    )
    backfill_cmd.add_argument("--end", required=True, metavar="TIME", help="end (exclusive)")
    backfill_cmd.add_argument(
        "--max", type=_count, default=None, metavar="N", help="most runs without --yes"
    )
    backfill_cmd.add_argument("--yes", action="store_true", help="start more than the maximum")
    backfill_cmd.add_argument(
        "--wait",
        action="store_true",
        help="wait until every run has finished, printing one line per run as it ends: "
        "slot, origin, status, duration, counts (and the error of a failed one)",
    )
    backfill_cmd.add_argument(
        "--timeout",
        type=positive_seconds,
        default=None,
        metavar="SECONDS",
        help=f"with --wait: how long to wait for all the runs (default {DEFAULT_WAIT_SECONDS:g})",
    )
    add_cluster_wait(backfill_cmd)
    backfill_cmd.set_defaults(handler=_backfill)

    pause_cmd = _command(
        commands,
        "pause",
        "pause a job's schedule, saying why",
        "Pause the job's schedule on Temporal with a note saying why. A sync keeps an "
        "operator's pause; `resume` lifts it.",
        EXIT_PAUSE,
    )
    pause_cmd.add_argument("job", metavar="ID", help="job id")
    pause_cmd.add_argument("--note", required=True, metavar="TEXT", help="why (required)")
    add_cluster_wait(pause_cmd)
    pause_cmd.set_defaults(handler=_pause)

    resume_cmd = _command(
        commands,
        "resume",
        "resume a paused job's schedule",
        "Unpause the job's schedule. Runs missed while it was paused can be started with "
        "`backfill`.",
        EXIT_PAUSE,
    )
    resume_cmd.add_argument("job", metavar="ID", help="job id")
    resume_cmd.add_argument(
        "--note", default=None, metavar="TEXT", help="the note (default: the job's intent)"
    )
    add_cluster_wait(resume_cmd)
    resume_cmd.set_defaults(handler=_resume)


cli._EXTRA_COMMANDS.append(add)

__all__ = ["BACKFILL_HARD_LIMIT", "OperationError", "add"]
