"""Fleet throughput and fire latency: our scheduled jobs against raw Temporal, in one run.

Both sides share one Temporal dev server (and our side one PostgreSQL) and run the same
number of worker processes. The baseline (`bench/fleet_raw.py`) is a workflow with one
no-op activity; ours is `ScheduledJobWorkflow` running the invoice-reminders kind on an
empty invoices table, so what is measured is the engine's bookkeeping, not a job's work.

Cases, each run in interleaved rounds (raw, ours, ours, raw, raw, ours, ...) so a trend in
the machine's load weighs on both sides:

- **direct**: N workflows started at once with `start_workflow`; workflows per second from
  the first start to the last completion. Each of ours gets its own job name (a direct
  start's slot is its start second: one job would make most of them duplicates).
- **backfill**: one paused `* * * * *` schedule per side, N past minutes backfilled;
  workflows per second until all N closed (bound by how fast the server starts them).
- **latency**: an every-5-seconds schedule per side for `--latency-seconds`: from each
  slot to its first activity starting (raw: the no-op; ours: the claim's row, stamped by
  PostgreSQL's clock at insert), p50 and p99.

    .venv/bin/python bench/fleet.py --rounds 2

Results (medians, every round, the ratio ours / raw, the machine and the command) are
appended to bench/RESULTS.md.
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
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleBackfill,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
)
from temporalio.contrib.pydantic import pydantic_data_converter

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from fleet_raw import RawWorkflow  # noqa: E402
from sync_schedules import describe_machine, provenance, write_results  # noqa: E402

from devstack import EmbeddedPostgres, TemporalDevServer, free_port  # noqa: E402
from schedules.catalog import default_catalog  # noqa: E402
from schedules.compile import MANAGED_MEMO_KEY, MANAGED_MEMO_VALUE, compile_schedule, job_run  # noqa: E402
from worker.migrate import apply_migrations  # noqa: E402
from workflows import ScheduledJobWorkflow  # noqa: E402

ROOT = HERE.parent


@dataclass
class Figures:
    """One case's figures per side: a list of values per round."""

    raw: list[float] = field(default_factory=list)
    ours: list[float] = field(default_factory=list)


class Fleet:
    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args = args
        self.workdir = workdir
        self.pg = EmbeddedPostgres(workdir / "pg", free_port())
        self.temporal = TemporalDevServer(free_port(), None, None, workdir / "temporal.log")
        self.procs: list[subprocess.Popen] = []
        self.raw_queue = f"raw-{uuid.uuid4().hex[:6]}"
        self.our_queue = f"ours-{uuid.uuid4().hex[:6]}"

    async def start(self) -> None:
        self.pg.start()
        self.db_url = self.pg.create_database("fleet")
        apply_migrations(self.db_url)
        self.temporal.start()
        await self.temporal.wait_ready()
        self.client = await Client.connect(
            self.temporal.address, data_converter=pydantic_data_converter
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "DATABASE_"))}
        ours_env = env | {
            "TEMPORAL_ADDRESS": self.temporal.address,
            "TEMPORAL_TASK_QUEUE": self.our_queue,
            "DATABASE_URL": self.db_url,
            "MIGRATE_ON_START": "false",
            "PYTHONUNBUFFERED": "1",
        }
        logs = []
        for i in range(self.args.workers):
            for side, argv, proc_env in (
                (
                    "raw",
                    [
                        sys.executable,
                        str(HERE / "fleet_raw.py"),
                        "--address",
                        self.temporal.address,
                        "--task-queue",
                        self.raw_queue,
                    ],
                    env,
                ),
                ("ours", [sys.executable, "-m", "worker"], ours_env),
            ):
                log = self.workdir / f"{side}-{i}.log"
                out = log.open("wb")
                self.procs.append(
                    subprocess.Popen(argv, cwd=ROOT, env=proc_env, stdout=out, stderr=out)
                )
                logs.append(log)
        deadline = time.monotonic() + 120
        while not all("worker ready" in log.read_text(errors="replace") for log in logs):
            if time.monotonic() > deadline:
                raise SystemExit("workers did not start; see " + str(self.workdir))
            await asyncio.sleep(0.2)

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.temporal.stop()
        self.pg.stop("immediate")

    # --- the cases ------------------------------------------------------------------------

    async def direct(self, side: str, round_: int) -> float:
        n = self.args.workflows
        job = default_catalog()["invoice-reminders"]
        limit = asyncio.Semaphore(50)

        async def start(i: int):
            async with limit:
                if side == "raw":
                    return await self.client.start_workflow(
                        RawWorkflow.run, id=f"raw-d{round_}-{i}", task_queue=self.raw_queue
                    )
                run = job_run(job).model_copy(update={"job_name": f"bench-d{round_}-{i}"})
                return await self.client.start_workflow(
                    ScheduledJobWorkflow.run,
                    run,
                    id=f"ours-d{round_}-{i}",
                    task_queue=self.our_queue,
                )

        began = time.monotonic()
        handles = await asyncio.gather(*(start(i) for i in range(n)))
        await asyncio.gather(*(h.result() for h in handles))
        return n / (time.monotonic() - began)

    async def backfill(self, side: str, round_: int) -> float:
        n = self.args.backfill
        schedule_id = f"{side}-b{round_}-{uuid.uuid4().hex[:4]}"
        if side == "raw":
            schedule = Schedule(
                action=ScheduleActionStartWorkflow(
                    RawWorkflow.run, id=schedule_id, task_queue=self.raw_queue
                ),
                spec=ScheduleSpec(cron_expressions=["* * * * *"]),
                policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.ALLOW_ALL),
                state=ScheduleState(paused=True),
            )
        else:
            job = default_catalog()["invoice-reminders"].model_copy(
                update={"id": schedule_id, "cron": "* * * * *", "timezone": "UTC"}
            )
            schedule = compile_schedule(
                job, self.our_queue, timing_since=datetime.now(UTC).replace(microsecond=0)
            )
            schedule.state.paused = True
        await self.client.create_schedule(
            schedule_id, schedule, memo={MANAGED_MEMO_KEY: MANAGED_MEMO_VALUE}
        )
        end = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)
        began = time.monotonic()
        await self.client.get_schedule_handle(schedule_id).backfill(
            ScheduleBackfill(
                start_at=end - timedelta(minutes=n) + timedelta(seconds=30),
                end_at=end,
                overlap=ScheduleOverlapPolicy.ALLOW_ALL,
            )
        )
        query = f"WorkflowId STARTS_WITH '{schedule_id}-' AND ExecutionStatus != 'Running'"
        while True:
            closed = (await self.client.count_workflows(query)).count
            if closed >= n:
                break
            if time.monotonic() - began > 1800:
                raise SystemExit(f"backfill {schedule_id}: {closed} of {n} closed")
            await asyncio.sleep(0.25)
        rate = n / (time.monotonic() - began)
        await self.client.get_schedule_handle(schedule_id).delete()
        return rate

    async def latency(self, side: str, round_: int) -> list[float]:
        schedule_id = f"{side}-l{round_}-{uuid.uuid4().hex[:4]}"
        every = timedelta(seconds=5)
        if side == "raw":
            schedule = Schedule(
                action=ScheduleActionStartWorkflow(
                    RawWorkflow.run, id=schedule_id, task_queue=self.raw_queue
                ),
                spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=every)]),
                policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
            )
        else:
            job = default_catalog()["invoice-reminders"].model_copy(
                update={"id": schedule_id, "cron": None, "interval": every, "timezone": "UTC"}
            )
            schedule = compile_schedule(
                job, self.our_queue, timing_since=datetime.now(UTC).replace(microsecond=0)
            )
        await self.client.create_schedule(
            schedule_id, schedule, memo={MANAGED_MEMO_KEY: MANAGED_MEMO_VALUE}
        )
        await asyncio.sleep(self.args.latency_seconds)
        await self.client.get_schedule_handle(schedule_id).delete()
        # Let the last started runs finish before reading them.
        query = f"WorkflowId STARTS_WITH '{schedule_id}-'"
        while (await self.client.count_workflows(query + " AND ExecutionStatus = 'Running'")).count:
            await asyncio.sleep(0.25)
        if side == "raw":
            found = []
            async for entry in self.client.list_workflows(query):
                result = await self.client.get_workflow_handle(
                    entry.id, run_id=entry.run_id
                ).result()
                started = datetime.fromisoformat(result["activity_started"])
                found.append(
                    (started - datetime.fromisoformat(result["scheduled"])).total_seconds()
                )
            return found
        with psycopg.connect(self.db_url) as conn:
            rows = conn.execute(
                "SELECT extract(epoch FROM started_at - scheduled_at) FROM job_executions "
                "WHERE job_name = %s",
                (schedule_id,),
            ).fetchall()
        return [float(r[0]) for r in rows]


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(args: argparse.Namespace) -> str:
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="fleet-") as tmp:
        fleet = Fleet(args, Path(tmp))
        await fleet.start()
        try:
            direct, backfill = Figures(), Figures()
            latencies: dict[str, list[float]] = {"raw": [], "ours": []}
            for r in range(args.rounds):
                order = ("raw", "ours") if r % 2 == 0 else ("ours", "raw")
                for side in order:
                    rate = await fleet.direct(side, r)
                    getattr(direct, side).append(rate)
                    print(f"round {r + 1} direct {side}: {rate:.1f} wf/s", file=sys.stderr)
                for side in order:
                    rate = await fleet.backfill(side, r)
                    getattr(backfill, side).append(rate)
                    print(f"round {r + 1} backfill {side}: {rate:.1f} wf/s", file=sys.stderr)
                for side in order:
                    found = await fleet.latency(side, r)
                    latencies[side] += found
                    print(
                        f"round {r + 1} latency {side}: {len(found)} runs, "
                        f"p50 {quantile(found, 0.5):.3f}s",
                        file=sys.stderr,
                    )
        finally:
            fleet.stop()
    return render(args, load, direct, backfill, latencies)


def render(args, load, direct: Figures, backfill: Figures, latencies) -> str:
    def rates(values: list[float]) -> str:
        return ", ".join(f"{v:.1f}" for v in values)

    def ratio(figures: Figures) -> float:
        return statistics.median(figures.ours) / statistics.median(figures.raw)

    raw_l, our_l = latencies["raw"], latencies["ours"]
    p50 = (quantile(raw_l, 0.5), quantile(our_l, 0.5))
    p99 = (quantile(raw_l, 0.99), quantile(our_l, 0.99))
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    d, b = ratio(direct), ratio(backfill)
    return f"""
## Fleet: run of {when}, {args.workers} worker processes a side

Written by `bench/fleet.py` (see its docstring). Command, from the repository root:

{provenance(describe_machine(), load)}

| case | raw Temporal (each round) | ours (each round) | ours / raw (medians) | target |
| --- | --- | --- | ---: | --- |
| {args.workflows} workflows started directly, wf/s | {rates(direct.raw)} | {rates(direct.ours)} | {d:.2f}x | >= 0.9x: **{"met" if d >= 0.9 else "missed"}** |
| {args.backfill} slots backfilled through a schedule, wf/s | {rates(backfill.raw)} | {rates(backfill.ours)} | {b:.2f}x | >= 0.95x: **{"met" if b >= 0.95 else "missed"}** |
| fire latency p50, s ({len(raw_l)} / {len(our_l)} runs) | {p50[0]:.3f} | {p50[1]:.3f} | +{(p50[1] - p50[0]) * 1000:.0f} ms | within 50 ms: **{"met" if p50[1] - p50[0] <= 0.05 else "missed"}** |
| fire latency p99, s | {p99[0]:.3f} | {p99[1]:.3f} | | under 1 s: **{"met" if p99[1] < 1 else "missed"}** |

Latency: raw, from the slot (TemporalScheduledStartTime) to the no-op activity's start;
ours, from the slot to the claim's `job_executions` row (PostgreSQL's clock at insert).
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--workflows", type=int, default=300)
    parser.add_argument("--backfill", type=int, default=300)
    parser.add_argument("--latency-seconds", type=float, default=60.0)
    parser.add_argument("--output", type=Path, default=HERE / "RESULTS.md")
    parser.add_argument("--no-output", action="store_true", help="print only")
    args = parser.parse_args(argv)
    section = asyncio.run(run(args))
    print(section)
    if not args.no_output:
        write_results(args.output, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
