"""`python -m schedules validate`: check the catalog and list every problem; touches nothing."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from core.errors import CatalogError
from schedules.catalog.files import read_catalog
from schedules.catalog.model import load_catalog
from schedules.cli import context as cli
from schedules.sync.plan import compile_jobs
from worker.settings import Settings

NAME = "validate"
HELP = "check the catalog and list every problem; touches nothing"
DESCRIPTION = (
    "Validate the whole catalog. Every problem is listed with its job, field and value. "
    "Nothing is sent to Temporal."
)
EXIT_CODES = "exit codes: 0 valid; 2 invalid (a catalog without jobs included)"


def configure(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    return cli.command(subparsers, NAME, HELP, DESCRIPTION, EXIT_CODES)


async def run(args: argparse.Namespace, ctx: cli.Context) -> int:
    jobs = load_catalog(args.catalog, engine=cli.with_engine(args))
    own = [job.id for job in jobs if job.id in read_catalog(args.catalog)]
    if not own:  # valid TOML, but a sync of it would delete every schedule of the catalog
        raise CatalogError(
            f"{args.catalog or 'schedules/jobs.toml'} has no jobs: a catalog schedules at least "
            "one (an empty file or one of comments is not a catalog; to remove every schedule, "
            "sync it with --max-prune 100)"
        )
    # Compiled too, as sync would: crons Temporal cannot express, schedules too large.
    compile_jobs(jobs, Settings.model_fields["temporal_task_queue"].default, datetime.now(UTC))
    engine = [job.id for job in jobs if job.id not in own]
    print(
        f"catalog ok: {len(own)} job(s): {', '.join(own)}"
        + (f"; and the engine's {len(engine)}: {', '.join(engine)}" if engine else "")
    )
    return 0
