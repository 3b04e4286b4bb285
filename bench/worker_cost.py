"""A run's worker CPU, measured without the fleet's noise: ours against raw Temporal and the
seed's pattern.

`bench/fleet.py` measures throughput on two cores that the dev server, PostgreSQL and the
workers share; the bursts of one side move by a fifth between repeats, more than the sides
differ, so its direct case cannot tell a 5% difference in what a run costs a worker. This
bench measures the two halves of that cost one at a time, in one process, sequentially, so
that nothing else runs beside them:

- **workflow**: one recorded history of each side (a run started directly on a fleet of one
  worker a side, `bench/fleet.py`'s sides) replayed `--runs` times by Temporal's `Replayer`,
  in the sandbox the workers run (`worker.run.workflow_runner`) and with each side's data
  converter and interceptors, in a process of its own each time (`replay_apart`): the CPU
  of the workflow code, its payloads and the sandbox (spans are not made on replay: the
  workflow's tracing is not in this half);
- **activity**: each side's activity called `--runs` times through the SDK's
  `ActivityEnvironment`, against the fleet's PostgreSQL, a job name per call as in the
  fleet's direct case: raw's no-op; the seed's claim, work and completion in one
  transaction; ours' `begin_and_work` for nightly-reconcile (plan, claim, work, outbox,
  journal and completion in one transaction), with tracing and metrics set up as a worker
  sets them up (`worker.telemetry`, metrics served on a port). The worker's interceptors
  are not in this half.

Each figure is this process's CPU (`time.process_time`: its Python and the SDK core's
threads; PostgreSQL's apart, counted by `bench/fleet.py`) per run, over `--rounds` rounds
in rotated order of the sides; medians, and ratios against the seed and raw measured in
the same run.

    .venv/bin/python bench/worker_cost.py            # 5 rounds of 500 runs a side
    .venv/bin/python bench/worker_cost.py --no-output --rounds 1 --runs 100

Results are appended to bench/results/<UTC date>.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from psycopg_pool import AsyncConnectionPool
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import ActivityEnvironment
from temporalio.worker import Replayer

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from fleet import SIDES, Fleet, bench_job  # noqa: E402
from fleet_raw import RawWorkflow, noop  # noqa: E402
from fleet_seed import SeedActivities, SeedInput, SeedWorkflow  # noqa: E402
from results_file import today  # noqa: E402
from sync_schedules import describe_machine, provenance, write_results  # noqa: E402

from activities.common.models import ClaimInput  # noqa: E402
from activities.run.begin import BeginInput, WorkOrBegin  # noqa: E402
from core.payloads import data_converter  # noqa: E402
from devstack import free_port  # noqa: E402
from jobs import kind_activities  # noqa: E402
from schedules.catalog.compile import job_run  # noqa: E402
from worker.run import fleet_workflows, workflow_runner  # noqa: E402
from worker.scrubbing import ScrubbingInterceptor  # noqa: E402
from worker.settings import load_settings  # noqa: E402
from worker.telemetry import tracing_interceptors, worker_telemetry  # noqa: E402

HALVES = ("workflow", "activity")


async def record_histories(fleet: Fleet) -> dict[str, WorkflowHistory]:
    """One history of each side's run, started directly (the fleet's cost case's runs)."""
    histories = {}
    for side in SIDES:
        handles = await fleet._runs(side, 3, f"{side}-wc-{uuid.uuid4().hex[:4]}")
        histories[side] = await handles[-1].fetch_history()
    return histories


def replayers() -> dict[str, Replayer]:
    """Each side's replayer, with the data converter, workflows and interceptors its workers
    have (`bench/fleet_raw.py`, `bench/fleet_seed.py`, `worker.run.build_worker`)."""
    return {
        "raw": Replayer(workflows=[RawWorkflow], workflow_runner=workflow_runner()),
        "seed": Replayer(
            workflows=[SeedWorkflow],
            workflow_runner=workflow_runner(),
            data_converter=pydantic_data_converter,
        ),
        "ours": Replayer(
            workflows=fleet_workflows(),
            workflow_runner=workflow_runner(),
            data_converter=data_converter,
            interceptors=[*tracing_interceptors(), ScrubbingInterceptor()],
        ),
    }


async def replay_cpu(replayer: Replayer, history: WorkflowHistory, runs: int) -> float:
    """CPU ms per replay of `history`, `runs` times."""

    async def repeated() -> AsyncIterator[WorkflowHistory]:
        for _ in range(runs):
            yield history

    began = time.process_time()
    await replayer.replay_workflows(repeated(), raise_on_replay_failure=True)
    return (time.process_time() - began) / runs * 1000


def replay_apart(side: str, path: Path, runs: int) -> float:
    """CPU ms per replay of the history in `path`, `runs` times, in a process of its own
    (`--replay`): one process replaying thousands of runs of a workflow whose module the
    sandbox imports afresh for each (raw's and the seed's) gets slower run after run (6 to
    23 ms over 2,500 runs), which a worker does not."""
    argv = [sys.executable, __file__, "--replay", side, str(path), "--runs", str(runs)]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=HERE.parent)
    return float(out.stdout.split()[-1])


async def replay_child(side: str, path: Path, runs: int) -> float:
    history = WorkflowHistory.from_json(f"{side}-run", path.read_text())
    replayer = replayers()[side]
    await replay_cpu(replayer, history, 20)  # warm: the sandbox's first imports
    return await replay_cpu(replayer, history, runs)


def activity_calls(
    pools: dict[str, AsyncConnectionPool],
) -> dict[str, tuple[Callable[..., Awaitable[Any]], Callable[[], tuple]]]:
    """Each side's activity and a maker of its next call's arguments (a new job a call)."""
    job = job_run(bench_job())
    ours = {
        a.__temporal_activity_definition.name: a  # type: ignore[attr-defined]
        for a in kind_activities(pools["ours"], load_settings())
    }[job.activity]

    def now() -> datetime:
        return datetime.now(UTC).replace(microsecond=0)

    def ours_args() -> tuple:
        claim = ClaimInput(
            job_name=f"wc-{uuid.uuid4().hex[:12]}",
            scheduled_at=now(),
            origin="direct",
            workflow_id=f"wc-{uuid.uuid4().hex[:8]}",
            run_id=str(uuid.uuid4()),
            alert_after_seconds=job.alert_after_seconds,
        )
        begin = BeginInput(claim=claim, server_now=datetime.now(UTC))
        return (WorkOrBegin(begin=begin, params=job.params),)

    def seed_args() -> tuple:
        return (
            SeedInput(
                job_name=f"wc-{uuid.uuid4().hex[:12]}",
                scheduled_at=now(),
                workflow_id=f"wc-{uuid.uuid4().hex[:8]}",
                run_id=str(uuid.uuid4()),
            ),
        )

    return {
        "raw": (noop, tuple),
        "seed": (SeedActivities(pools["seed"]).run_seed_job, seed_args),
        "ours": (ours, ours_args),
    }


async def activity_cpu(call: Callable[..., Awaitable[Any]], make: Callable[[], tuple], runs: int):
    """CPU ms per call of the activity, `runs` times one after the other."""
    env = ActivityEnvironment()
    arguments = [make() for _ in range(runs)]
    began = time.process_time()
    for args in arguments:
        await env.run(call, *args)
    return (time.process_time() - began) / runs * 1000


async def measure(args: argparse.Namespace, fleet: Fleet) -> dict[str, dict[str, list[float]]]:
    """Every round's figures: half -> side -> CPU ms per run, a value a round."""
    histories = await record_histories(fleet)
    figures: dict[str, dict[str, list[float]]] = {h: {s: [] for s in SIDES} for h in HALVES}
    os.environ |= {"DATABASE_URL": fleet.db_url, "TEMPORAL_ADDRESS": fleet.temporal.address}
    os.environ["METRICS_PORT"] = str(free_port())
    settings = load_settings()
    async with (
        worker_telemetry(settings),
        AsyncConnectionPool(fleet.db_url, min_size=1, max_size=10, open=False) as ours_pool,
        AsyncConnectionPool(fleet.seed_db_url, min_size=1, max_size=10, open=False) as seed_pool,
    ):
        await ours_pool.wait()
        await seed_pool.wait()
        calls = activity_calls({"ours": ours_pool, "seed": seed_pool})
        paths = {}
        for side in SIDES:
            paths[side] = fleet.workdir / f"{side}-history.json"
            paths[side].write_text(histories[side].to_json())
            await activity_cpu(*calls[side], 20)  # warm: imports, the pool's connections
        for r in range(args.rounds):
            order = SIDES[r % 3 :] + SIDES[: r % 3]
            for side in order:
                ms = replay_apart(side, paths[side], args.runs)
                figures["workflow"][side].append(ms)
                print(f"round {r + 1} workflow {side}: {ms:.2f} ms", file=sys.stderr)
            for side in order:
                ms = await activity_cpu(*calls[side], args.runs)
                figures["activity"][side].append(ms)
                print(f"round {r + 1} activity {side}: {ms:.2f} ms", file=sys.stderr)
    return figures


def render(args: argparse.Namespace, figures, load, took: float) -> str:
    def median(half: str, side: str) -> float:
        return statistics.median(figures[half][side])

    rows = []
    for half in HALVES:
        each = " | ".join(", ".join(f"{v:.2f}" for v in figures[half][side]) for side in SIDES)
        medians = " | ".join(f"{median(half, side):.2f}" for side in SIDES)
        rows.append(
            f"| {half} | {each} | {medians} | {median(half, 'ours') / median(half, 'seed'):.2f}x "
            f"| {median(half, 'ours') / median(half, 'raw'):.2f}x |"
        )
    total = {side: median("workflow", side) + median("activity", side) for side in SIDES}
    rows.append(
        "| both halves (sum of the medians) | | | | "
        + " | ".join(f"{total[side]:.2f}" for side in SIDES)
        + f" | {total['ours'] / total['seed']:.2f}x | {total['ours'] / total['raw']:.2f}x |"
    )
    table = "\n".join(rows)
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"""
## Worker CPU per run, each half alone: run of {when}

Written by `bench/worker_cost.py` (see its docstring): a recorded run of each side replayed
(workflow) and each side's activity called directly against PostgreSQL (activity),
{args.runs} runs a side and round, {args.rounds} rounds in rotated order, one side at a
time (each side's replays in a process of their own); CPU ms per run of the process that
ran them (PostgreSQL's apart). Took {took:.0f} s. Command, from the
repository root:

{provenance(describe_machine(), load)}

| half | raw (each round) | seed (each round) | ours (each round) | raw | seed | ours | ours / seed | ours / raw |
| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |
{table}
"""


async def run(args: argparse.Namespace) -> str:
    load = os.getloadavg()
    began = time.monotonic()
    fleet_args = argparse.Namespace(
        workers=1, pin=False, telemetry=True, profile=None, gc_probe=False
    )
    with tempfile.TemporaryDirectory(prefix="worker-cost-") as tmp:
        fleet = Fleet(fleet_args, Path(tmp))
        await fleet.start()
        try:
            figures = await measure(args, fleet)
        finally:
            fleet.stop()
    return render(args, figures, load, time.monotonic() - began)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=500, help="runs a side and round")
    parser.add_argument("--output", type=Path, default=today())
    parser.add_argument("--no-output", action="store_true", help="print only")
    parser.add_argument(
        "--replay", nargs=2, metavar=("SIDE", "HISTORY"), help="internal: one side's replays"
    )
    args = parser.parse_args(argv)
    if args.replay:
        print(asyncio.run(replay_child(args.replay[0], Path(args.replay[1]), args.runs)))
        return 0
    section = asyncio.run(run(args))
    print(section)
    if not args.no_output:
        write_results(args.output, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
