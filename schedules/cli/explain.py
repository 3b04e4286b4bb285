"""`python -m schedules explain JOB [--at TIME]`: did a fire time run and, if not, why.

Fails fast: Temporal and PostgreSQL get `--timeout` seconds (default 5) before the command
says it cannot tell (exit 2). The evidence is `schedules.health.evidence.gather_evidence`, the
verdict `schedules.health.explain.explain`.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime

from schedules.catalog.times import parse_time
from schedules.cli import context as cli
from schedules.health.evidence import gather_evidence, latest_fire_time
from schedules.health.explain import as_json, explain, format_verdict

NAME = "explain"
HELP = "did a fire time run and, if not, why (from the record and the server)"
DESCRIPTION = (
    "For one fire time of a job (default: the latest due), or a manual run's own time, "
    "say whether it ran and, if not, why: paused (by whom and why), before the timing took effect, outside start/end, "
    "skipped by the catch-up policy or the starting deadline, the repeated DST hour, "
    "failed after N attempts, waiting for its upstream slots (depends_on), still running, "
    "no worker polling, Temporal unreachable, "
    "never started. Read-only."
)
EXIT_CODES = (
    "exit codes: 0 it ran (completed); 1 it did not, and why is printed; 2 cannot tell "
    "(Temporal or PostgreSQL unreachable) or bad input (an unknown job, a time it cannot read)"
)


def configure(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = cli.command(subparsers, NAME, HELP, DESCRIPTION, EXIT_CODES)
    parser.add_argument("job", help="the job id")
    parser.add_argument(
        "--at",
        metavar="TIME",
        help="the fire time: 2026-11-20T02:30 (the job's zone) or ...Z (default: the latest "
        "due); a manual run's own time, to the second, finds that run",
    )
    cli.add_json(parser)
    cli.add_timeout(
        parser, 5.0, "give up on an unreachable Temporal or PostgreSQL after this long (default 5)"
    )
    return parser


async def run(args: argparse.Namespace, ctx: cli.Context) -> int:
    job = cli.catalog_job(args, args.job)
    now = datetime.now(UTC)
    if args.at:
        try:
            fire = parse_time(args.at, job.timezone, now)
        except ValueError as exc:
            raise cli.BadInputError(f"--at: {exc}") from None
    else:
        fire = latest_fire_time(job, now)
        if fire is None:
            raise cli.BadInputError(f"{job.id} has no fire time before now to explain")
    ctx.wait_seconds = args.timeout
    evidence = await gather_evidence(
        ctx.client,
        cli.database_url(ctx),
        job,
        fire,
        now,
        task_queue=ctx.settings.temporal_task_queue,
        retry=ctx.retry,
    )
    verdict = explain(evidence)
    if args.json:
        print(json.dumps(as_json(evidence, verdict), indent=2))
    else:
        print(format_verdict(evidence, verdict))
    return verdict.exit_code
