"""The `explain` command: gather the evidence for one fire time, then print the verdict.

Fails fast: Temporal and PostgreSQL get `--timeout` seconds (default 5) before the command
says it cannot tell (exit 2).
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime, timedelta

from activities.catchup import second_occurrence_of
from core.errors import SchedulerError, TemporalUnreachableError
from schedules.catalog.model import JobSpec
from schedules.catalog.times import parse_time, utc_text
from schedules.cli import context as cli
from schedules.cli.context import Context
from schedules.health.explain import Evidence, as_json, explain, format_verdict
from schedules.server.backfills import BackfillRequest, backfill_requests
from schedules.server.state import (
    DatabaseUnavailableError,
    OperationError,
    execution_at,
    pollers,
    schedule_state,
    workflow_status,
)
from timing import Timing

EXIT_EXPLAIN = (
    "exit codes: 0 it ran (completed); 1 it did not, and why is printed; 2 cannot tell "
    "(Temporal or PostgreSQL unreachable) or bad input (an unknown job, a time it cannot read)"
)
_TICK = timedelta(microseconds=1)


class ExplainInputError(SchedulerError):
    """A job or time `explain` cannot use."""


def _grid(job: JobSpec) -> Timing:
    """The job's fire times without its bounds: explain judges a time against the grid
    and the bounds apart, so it can say "after the schedule's end_at"."""
    return job.timing.model_copy(update={"start_at": None, "end_at": None})


def latest_fire_time(job: JobSpec, now: datetime) -> datetime | None:
    """The job's newest fire time at or before `now`."""
    return _grid(job).last_before(now + _TICK)


def neighbours(job: JobSpec, at: datetime) -> tuple[datetime | None, datetime | None]:
    """The job's fire times just before and just after `at`."""
    grid = _grid(job)
    return grid.last_before(at), grid.next_after(at)


def on_grid(job: JobSpec, at: datetime) -> bool:
    return bool(_grid(job).fire_times(at, at + _TICK))


async def covering_backfill(ctx: Context, job: JobSpec, fire: datetime) -> BackfillRequest | None:
    """The newest backfill the server received over `fire` that drops overlapping slots."""
    requests = await backfill_requests(await ctx.client(), job.id)
    covering = [r for r in requests if r.start <= fire <= r.end and r.drops(job.overlap)]
    return covering[-1] if covering else None


async def gather(ctx: Context, job: JobSpec, fire: datetime, now: datetime) -> Evidence:
    """Everything the record and the server say about `fire`; unreachable servers are noted."""
    ev = Evidence(job=job, fire=fire, now=now, task_queue=ctx.settings.temporal_task_queue)
    ev.on_grid = on_grid(job, fire)
    if not ev.on_grid:
        ev.neighbours = neighbours(job, fire)
        first = second_occurrence_of(fire, job.timezone)
        if first is not None and on_grid(job, first):
            ev.repeated_of = first
        return ev
    if fire > now:
        return ev
    try:
        ev.row = await execution_at(ctx.settings.database_url.get_secret_value(), job.id, fire)
    except DatabaseUnavailableError as exc:
        ev.database_error = str(exc)
    try:
        ev.schedule = await schedule_state(ctx, job.id)
        ev.timing_since = ev.schedule.timing_since
        ev.workflow_status = await workflow_status(ctx, f"{job.id}-{utc_text(fire)}")
        ev.pollers = await pollers(ctx, ev.task_queue)
        if ev.row is None and ev.schedule.exists and ev.schedule.skipped_overlap:
            ev.backfill = await covering_backfill(ctx, job, fire)
    except (OperationError, TemporalUnreachableError) as exc:
        ev.server_error = str(exc)
    return ev


async def _explain(args: argparse.Namespace, ctx: Context) -> int:
    jobs = cli.catalog_jobs(args.catalog, args.job)
    if args.job not in jobs:
        raise ExplainInputError(
            f"unknown job {args.job!r}; the catalog has: {', '.join(jobs) or 'no jobs'}"
        )
    job = jobs[args.job]
    now = datetime.now(UTC)
    if args.at:
        try:
            fire = parse_time(args.at, job.timezone, now)
        except ValueError as exc:
            raise ExplainInputError(f"--at: {exc}") from None
    else:
        fire = latest_fire_time(job, now)
        if fire is None:
            raise ExplainInputError(f"{job.id} has no fire time before now to explain")
    ctx.wait_seconds = args.timeout
    evidence = await gather(ctx, job, fire, now)
    verdict = explain(evidence)
    if args.json:
        print(json.dumps(as_json(evidence, verdict), indent=2))
    else:
        print(format_verdict(evidence, verdict))
    return verdict.exit_code


def add(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "explain",
        help="did a fire time run and, if not, why (from the record and the server)",
        description="For one fire time of a job (default: the latest due), say whether it "
        "ran and, if not, why: paused, before the timing took effect, outside start/end, "
        "skipped by the catch-up policy or the starting deadline, the repeated DST hour, "
        "failed after N attempts, still running, no worker polling, Temporal unreachable, "
        "never started. Read-only.",
        epilog=EXIT_EXPLAIN,
    )
    parser.add_argument("job", help="the job id")
    parser.add_argument(
        "--at",
        metavar="TIME",
        help="the fire time: 2026-11-20T02:30 (the job's zone) or ...Z (default: the latest due)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument(
        "--timeout",
        type=cli.positive_seconds,
        default=5.0,
        metavar="SECONDS",
        help="give up on an unreachable Temporal or PostgreSQL after this long (default 5)",
    )
    parser.set_defaults(handler=_explain)


cli._EXTRA_COMMANDS.append(add)
