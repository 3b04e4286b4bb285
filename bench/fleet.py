"""Fleet cost, throughput and fire latency: ours against raw Temporal and the seed's pattern.

Three sides share one Temporal dev server (and one PostgreSQL, a database per side that
has one) and run the same number of worker processes:

- **raw** (`bench/fleet_raw.py`): a workflow with one no-op activity;
- **seed** (`bench/fleet_seed.py`): the seed's pattern written by hand on Temporal, one
  activity that claims the execution row `ON CONFLICT DO NOTHING`, does the job's work and
  marks it completed in one transaction: what a careful user would write instead;
- **ours**: `LocalTransactionJobWorkflow` (`ScheduledJobWorkflow`'s type for a kind whose
  slot work fits in one transaction, that transaction run as a local activity) running the
  catalog's nightly-reconcile job (its slot work is one statement: the run is planned,
  claimed, worked and completed in one transaction, `activities.run.begin.begin_and_work`) on
  empty ledger and payments tables, so
  what is measured is the engine's bookkeeping, not a job's work; the seed side runs the
  same statement. With `--job invoice-reminders`, ours runs the chunked kind of the seeds
  instead (`ChunkedJobWorkflow`), over `--invoices` overdue invoices reminded within the
  week (default 100: one chunk of work, the small run of issue 42, planned, claimed, worked
  and completed in one transaction; no message queued, as no relay runs here); the seed
  side still runs the reconcile statement. Its workers run as deploy/ ships them: `WORKER_ROLE=jobs` (the
  dispatchers are processes of their own), telemetry on (each span made for its trace
  and span ids, which log lines carry, and recorded only when an exporter is configured:
  none is; metrics served on a port), and, like every side's, from compiled bytecode, as
  `pip install` leaves the image.

With `--pin` (the default on two cores or more) the dev server runs on a core of its own
and PostgreSQL, the workers and the bench on the others, so a ratio measures our cost and
not the sharing. Cases, each round in a rotated order of the sides:

- **cost**: `--cost-runs` runs started directly; per run, counted: history events,
  workflow tasks, activity and local-activity calls (and the activity tasks the server
  dispatched through matching, not started eagerly on the worker that scheduled them),
  the calls the server's frontend served, payload bytes, PostgreSQL transactions and
  statements, CPU seconds of the server, the side's workers and PostgreSQL
  (`bench/run_cost.py`, the server's figures from its own metrics).
- **direct**: N workflows started at once with `start_workflow`; workflows per second from
  the first start to the last completion. Each of ours gets its own job name (a direct
  start's slot is its start second: one job would make most of them duplicates). Run
  `--direct-repeats` times a round, each time in the next rotation of the sides: the
  rounds of one side move by a fifth, more than the sides differ. Also reported: the
  ratios paired within each repeat (its three sides ran back to back), and the side's
  workers' CPU by thread (event loop, Python threads, SDK core), which
  `bench/worker_cost.py` compares with each half of a run measured alone; with
  `--gc-probe`, how much of the workers' CPU their garbage collectors took.
- **backfill**: one paused `* * * * *` schedule per side, N past minutes backfilled;
  workflows per second until all N closed (bound by how fast the server starts them).
- **latency**: an every-5-seconds schedule per side, bounded to `--latency-seconds` (its
  spec's start and end, the same on every side): from each slot to its first activity
  starting (raw: the no-op; seed and ours: the claim's row, stamped by PostgreSQL's clock
  at insert), p50 and p99.

Then the **audit**: every bench that runs slots ends with `python -m schedules audit`
clean. Each job ours ran is in a catalog the bench writes (`bench/fleet_audit.py`: the
backfill and latency jobs bounded by `start_at`/`end_at` to exactly the slots fired, and
their schedules compiled from those entries), and the command judges them all, as an
operator runs it, before the servers stop. Its verdict, what it judged and how long it
took go into the section; a finding (an `inconclusive` one too) fails the bench: exit 1,
the findings printed and quoted in the section.

    .venv/bin/python bench/fleet.py            # every case, 3 rounds, defaults below
    .venv/bin/python bench/fleet.py --job invoice-reminders   # the chunked kind, one chunk
    .venv/bin/python bench/fleet.py --cases cost --rounds 1 --profile /tmp/prof  # py-spy

The counted rows (events, tasks, transactions, statements, payload bytes) do not depend on
the machine's load; CPU ms per run move little with it; wall-clock throughput does, so
the direct case also reports what the two cores would sustain from the CPU each side used.

Results (medians, every round, the ratios, the machine and the command) are appended to
bench/results/<UTC date>.md.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import json
import os
import signal
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

from core.payloads import data_converter

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import run_cost  # noqa: E402
from fleet_audit import QUOTED, AuditResult, OursCatalog, audit_ours  # noqa: E402
from fleet_raw import RawWorkflow  # noqa: E402
from fleet_seed import SeedWorkflow  # noqa: E402
from results_file import today  # noqa: E402
from sync_schedules import describe_machine, provenance, write_results  # noqa: E402

from devstack import EmbeddedPostgres, TemporalDevServer, free_port  # noqa: E402
from schedules.catalog.compile import (  # noqa: E402
    MANAGED_MEMO_KEY,
    MANAGED_MEMO_VALUE,
    compile_schedule,
    job_run,
)
from schedules.catalog.durations import format_duration  # noqa: E402
from schedules.catalog.model import default_catalog  # noqa: E402
from worker.migrate import apply_migrations  # noqa: E402
from workflows import workflow_for  # noqa: E402

ROOT = HERE.parent


# A catalog job whose work fits in one transaction: the case issue 22 measures. `--job`
# may name the chunked one instead, whose small runs issue 42 measures.
BENCH_JOB = "nightly-reconcile"
JOBS = (BENCH_JOB, "invoice-reminders")
# The project's packages (deploy/Dockerfile installs these).
PACKAGES = ("core", "timing", "activities", "workflows", "jobs", "worker", "schedules", "devstack")


def bench_job(name: str = BENCH_JOB):
    """The catalog's job `name` (nightly-reconcile: without its upstream, hourly-sync is
    not run here): the cost of a plain run."""
    return default_catalog()[name].model_copy(update={"depends_on": []})


def direct_job(round_: int, i: int) -> str:
    """The job name of the direct case's run `i` (a job per run: a direct start's slot is
    its start second, so one job would make most of them duplicates)."""
    return f"bench-d{round_}-{i}"


@dataclass
class Figures:
    """One case's figures per side: a list of values per round."""

    raw: list[float] = field(default_factory=list)
    seed: list[float] = field(default_factory=list)
    ours: list[float] = field(default_factory=list)


class Fleet:
    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args = args
        self.workdir = workdir
        self.pg = EmbeddedPostgres(workdir / "pg", free_port())
        # Its metrics count the calls a run costs it (`run_cost.server_calls`).
        metrics_port = free_port()
        self.temporal = TemporalDevServer(
            free_port(), None, None, workdir / "temporal.log", metrics_port=metrics_port
        )
        self.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        self.procs: list[subprocess.Popen] = []
        self.raw_queue = f"raw-{uuid.uuid4().hex[:6]}"
        self.seed_queue = f"seed-{uuid.uuid4().hex[:6]}"
        self.our_queue = f"ours-{uuid.uuid4().hex[:6]}"
        self.pids: dict[str, list[int]] = {"raw": [], "seed": [], "ours": []}
        # Every job ours runs, for the audit that judges them at the end (`audit`).
        self.catalog = OursCatalog(args.job)
        # CPU ms per run on each core during each direct case (`_cpu`).
        self.direct_cpu: dict[str, list[dict[str, float]]] = {"raw": [], "seed": [], "ours": []}
        self.gc_dir = workdir / "gc"  # `--gc-probe`: each process's collector time
        # The server on a core of its own, everything else on the other (`--pin`).
        cores = sorted(os.sched_getaffinity(0))
        self.server_cores = {cores[0]} if args.pin and len(cores) > 1 else set(cores)
        self.other_cores = set(cores[1:]) if args.pin and len(cores) > 1 else set(cores)

    async def start(self) -> None:
        # Bytecode as `pip install` leaves it in production (deploy/Dockerfile): Temporal's
        # sandbox re-imports workflow modules for every run, and with PYTHONDONTWRITEBYTECODE
        # set and no .pyc a checkout would compile them from source each time.
        for package in (*PACKAGES, "bench"):
            compileall.compile_dir(ROOT / package, quiet=1)
        os.sched_setaffinity(0, self.other_cores)  # PostgreSQL and workers inherit it
        self.pg.start()
        # pg_stat_statements counts each side's statements (`cost`): preloaded, so restart.
        with psycopg.connect(self.pg.url(), autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
        self.pg.stop("fast")
        self.pg.start()
        self.db_url = self.pg.create_database("fleet")
        self.seed_db_url = self.pg.create_database("fleet_seed")
        for url in (self.pg.url(), self.db_url, self.seed_db_url):
            if url != self.pg.url():
                apply_migrations(url)
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        if self.args.job == "invoice-reminders":
            self._insert_invoices(self.args.invoices)
        os.sched_setaffinity(0, self.server_cores)
        self.temporal.start()
        os.sched_setaffinity(0, self.other_cores)
        await self.temporal.wait_ready()
        self.client = await Client.connect(self.temporal.address, data_converter=data_converter)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "DATABASE_"))}
        if self.args.gc_probe:  # every side's processes (`bench/gc_probe`)
            self.gc_dir.mkdir()
            path = os.pathsep.join(filter(None, [str(HERE / "gc_probe"), env.get("PYTHONPATH")]))
            env |= {"PYTHONPATH": path, "GC_PROBE_DIR": str(self.gc_dir)}
        # What `python -m schedules audit` reads ours' side with.
        self.audit_env = env | {
            "TEMPORAL_ADDRESS": self.temporal.address,
            "TEMPORAL_TASK_QUEUE": self.our_queue,
            "DATABASE_URL": self.db_url,
        }
        ours_env = self.audit_env | {
            "MIGRATE_ON_START": "false",
            "PYTHONUNBUFFERED": "1",
            # As deploy/ ships them: workers serve the jobs' queue, dispatchers run apart.
            "WORKER_ROLE": "jobs",
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
                (
                    "seed",
                    [
                        sys.executable,
                        str(HERE / "fleet_seed.py"),
                        "--address",
                        self.temporal.address,
                        "--task-queue",
                        self.seed_queue,
                        "--database-url",
                        self.seed_db_url,
                    ],
                    env,
                ),
                # As production runs it: spans made (recorded with an exporter), metrics served
                # (`--no-telemetry`, to see what they cost: neither).
                ("ours", [sys.executable, "-m", "worker"], ours_env | self._telemetry()),
            ):
                log = self.workdir / f"{side}-{i}.log"
                out = log.open("wb")
                proc = subprocess.Popen(argv, cwd=ROOT, env=proc_env, stdout=out, stderr=out)
                self.procs.append(proc)
                self.pids[side].append(proc.pid)
                logs.append(log)
        deadline = time.monotonic() + 120
        while not all("worker ready" in log.read_text(errors="replace") for log in logs):
            if time.monotonic() > deadline:
                tails = "\n".join(
                    f"{log.name}: {log.read_text(errors='replace')[-4000:]}" for log in logs
                )
                raise SystemExit(f"workers did not start:\n{tails}")
            await asyncio.sleep(0.2)

    def _insert_invoices(self, count: int) -> None:
        """`count` unpaid invoices overdue by ten days and reminded an hour ago, for ours'
        invoice-reminders runs: each run does its one chunk (the statement over the whole
        table) and finds none due within the job's week, so it queues no message, which no
        outbox-relay runs here to deliver (the audit would report them pending)."""
        due = datetime.now(UTC).date() - timedelta(days=10)
        with psycopg.connect(self.db_url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO invoices"
                " (invoice_number, customer_email, status, due_date, last_reminder_at) "
                "SELECT 'INV-' || n, 'c' || n || '@example.com', 'Unpaid', %s,"
                " now() - interval '1 hour' FROM generate_series(1, %s) AS n",
                (due, count),
            )

    def _telemetry(self) -> dict[str, str]:
        if self.args.telemetry:
            return {"METRICS_PORT": str(free_port())}
        return {"OTEL_SDK_DISABLED": "true"}

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

    def _profile(self, side: str, name: str) -> list[subprocess.Popen]:
        """With `--profile DIR`: py-spy samples the side's first worker while it holds the
        GIL (`--gil`: its Python CPU, not its waits), during the cost window and each
        direct case; folded stacks in DIR/<side>-<name>.txt (`bench/profile_report.py`)."""
        if self.args.profile is None:
            return []
        self.args.profile.mkdir(parents=True, exist_ok=True)
        out = self.args.profile / f"{side}-{name}.txt"
        argv = [str(Path(sys.executable).parent / "py-spy"), "record", "--pid"]
        argv += [str(self.pids[side][0]), "--rate", "250", "--gil", "--native"]
        argv += ["--format", "raw", "-o", str(out)]
        return [subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]

    @staticmethod
    def _stop_profiles(profiles: list[subprocess.Popen]) -> None:
        for profile in profiles:
            profile.send_signal(signal.SIGINT)
            profile.wait(60)

    # --- the cases ------------------------------------------------------------------------

    async def direct(self, side: str, round_: int) -> float:
        n = self.args.workflows
        job = bench_job(self.args.job)
        limit = asyncio.Semaphore(50)

        async def start(i: int):
            async with limit:
                if side == "raw":
                    return await self.client.start_workflow(
                        RawWorkflow.run, id=f"raw-d{round_}-{i}", task_queue=self.raw_queue
                    )
                if side == "seed":
                    return await self.client.start_workflow(
                        SeedWorkflow.run,
                        direct_job(round_, i),
                        id=f"seed-d{round_}-{i}",
                        task_queue=self.seed_queue,
                    )
                run = job_run(job).model_copy(update={"job_name": direct_job(round_, i)})
                return await self.client.start_workflow(
                    workflow_for(run),
                    run,
                    id=f"ours-d{round_}-{i}",
                    task_queue=self.our_queue,
                )

        if side == "ours":
            self.catalog.started_directly(direct_job(round_, i) for i in range(n))
        profiles = self._profile(side, f"direct{round_ + 1}")
        cpu = self._cpu(side)
        calls = run_cost.server_calls(self.metrics_url)
        began = time.monotonic()
        handles = await asyncio.gather(*(start(i) for i in range(n)))
        await asyncio.gather(*(h.result() for h in handles))
        rate = n / (time.monotonic() - began)
        self._stop_profiles(profiles)
        used = {key: (value - cpu[key]) / n * 1000 for key, value in self._cpu(side).items()}
        after = run_cost.server_calls(self.metrics_url)
        for key in ("matched_activities", "backlogged_sticky", "backlogged_normal"):
            used[key] = (after[key] - calls[key]) / n
        self.direct_cpu[side].append(used)
        return rate

    def _cpu(self, side: str) -> dict[str, float]:
        """CPU seconds so far: the server's core (the dev server) and the other one (the
        side's workers, PostgreSQL, this bench)."""
        postmaster = run_cost.postmaster_pid(self.pg.data_dir)
        threads = [run_cost.thread_cpu_seconds(pid) for pid in self.pids[side]]
        by_thread = {kind: sum(t[kind] for t in threads) for kind in THREAD_KINDS}
        parts = {
            "workers": sum(run_cost.cpu_seconds(pid) for pid in self.pids[side]),
            "postgres": run_cost.tree_cpu_seconds(postmaster),
            "bench": run_cost.cpu_seconds(os.getpid()),
        }
        return (
            {"server": run_cost.tree_cpu_seconds(self.temporal.process.pid)}
            | parts
            | {"other": sum(parts.values())}
            | by_thread
            | self._gc_seconds(side)
        )

    def _gc_seconds(self, side: str) -> dict[str, float]:
        """`--gc-probe`: seconds the side's workers' garbage collectors ran so far, in the
        young generations and in full collections (`bench/gc_probe`)."""
        totals = {"gc_young": 0.0, "gc_full": 0.0}
        for pid in self.pids[side] if self.args.gc_probe else ():
            path = self.gc_dir / f"{pid}.json"
            if path.exists():
                found = json.loads(path.read_text())
                totals["gc_young"] += found["young"]
                totals["gc_full"] += found["full"]
        return totals

    async def backfill(self, side: str, round_: int) -> float:
        n = self.args.backfill
        schedule_id = f"{side}-b{round_}-{uuid.uuid4().hex[:4]}"
        # The last N whole minutes before the previous one: the backfill's range.
        end = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)
        if side == "raw":
            schedule = Schedule(
                action=ScheduleActionStartWorkflow(
                    RawWorkflow.run, id=schedule_id, task_queue=self.raw_queue
                ),
                spec=ScheduleSpec(cron_expressions=["* * * * *"]),
                policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.ALLOW_ALL),
                state=ScheduleState(paused=True),
            )
        elif side == "seed":
            schedule = Schedule(
                action=ScheduleActionStartWorkflow(
                    SeedWorkflow.run, schedule_id, id=schedule_id, task_queue=self.seed_queue
                ),
                spec=ScheduleSpec(cron_expressions=["* * * * *"]),
                policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.ALLOW_ALL),
                state=ScheduleState(paused=True),
            )
        else:
            # Its catalog entry, bounded to the minutes backfilled, paused: the audit's oracle
            # expects exactly those (`fleet_audit`). The schedule is compiled from it.
            job = self.catalog.scheduled(
                schedule_id,
                cron="* * * * *",
                timezone="UTC",
                start_at=end - timedelta(minutes=n - 1),
                end_at=end,
                paused=True,
            )
            schedule = compile_schedule(
                job, self.our_queue, timing_since=datetime.now(UTC).replace(microsecond=0)
            )
        await self.client.create_schedule(
            schedule_id, schedule, memo={MANAGED_MEMO_KEY: MANAGED_MEMO_VALUE}
        )
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
        # Ours' too: the audit judges a deleted schedule's job from its first recorded slot
        # to its last (`fleet_audit`).
        await self.client.get_schedule_handle(schedule_id).delete()
        return rate

    async def latency(self, side: str, round_: int) -> list[float]:
        schedule_id = f"{side}-l{round_}-{uuid.uuid4().hex[:4]}"
        every = timedelta(seconds=5)
        # Every side's schedule fires the same window, bounded on its spec: `--latency-seconds`
        # (whole ones: the catalog's instants are) from a second or two after it is created,
        # so that no fire time precedes its creation. `end_at` is inclusive, as Temporal's.
        now = datetime.now(UTC)
        start_at = (now + timedelta(seconds=2)).replace(microsecond=0)
        end_at = start_at + timedelta(seconds=max(5, round(self.args.latency_seconds)) - 1)
        spec = ScheduleSpec(
            intervals=[ScheduleIntervalSpec(every=every)], start_at=start_at, end_at=end_at
        )
        if side == "raw":
            schedule = Schedule(
                action=ScheduleActionStartWorkflow(
                    RawWorkflow.run, id=schedule_id, task_queue=self.raw_queue
                ),
                spec=spec,
                policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
            )
        elif side == "seed":
            schedule = Schedule(
                action=ScheduleActionStartWorkflow(
                    SeedWorkflow.run, schedule_id, id=schedule_id, task_queue=self.seed_queue
                ),
                spec=spec,
                policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
            )
        else:
            # Its catalog entry with the same bounds; the schedule is compiled from it and
            # kept until the audit has judged every fire time of the window (`fleet_audit`).
            job = self.catalog.scheduled(
                schedule_id,
                cron=None,
                interval=format_duration(every),
                timezone="UTC",
                start_at=start_at,
                end_at=end_at,
            )
            schedule = compile_schedule(
                job, self.our_queue, timing_since=now.replace(microsecond=0)
            )
        await self.client.create_schedule(
            schedule_id, schedule, memo={MANAGED_MEMO_KEY: MANAGED_MEMO_VALUE}
        )
        await self._fired_all(schedule_id, end_at)
        if side != "ours":
            await self.client.get_schedule_handle(schedule_id).delete()
        query = f"WorkflowId STARTS_WITH '{schedule_id}-'"
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
        with psycopg.connect(self.seed_db_url if side == "seed" else self.db_url) as conn:
            rows = conn.execute(
                "SELECT extract(epoch FROM started_at - scheduled_at) FROM job_executions "
                "WHERE job_name = %s",
                (schedule_id,),
            ).fetchall()
        return [float(r[0]) for r in rows]

    async def _fired_all(self, schedule_id: str, end_at: datetime) -> None:
        """Wait until the schedule has passed `end_at` (its last action taken: no next one)
        and every run it started has closed."""
        await asyncio.sleep(max(0.0, (end_at - datetime.now(UTC)).total_seconds()))
        handle = self.client.get_schedule_handle(schedule_id)
        deadline = time.monotonic() + 300
        while True:
            info = (await handle.describe()).info
            if not info.next_action_times:
                query = f"WorkflowId STARTS_WITH '{schedule_id}-' AND ExecutionStatus != 'Running'"
                if (await self.client.count_workflows(query)).count >= info.num_actions:
                    return
            if time.monotonic() > deadline:
                raise SystemExit(f"{schedule_id}: its runs have not all closed")
            await asyncio.sleep(0.25)

    async def _runs(self, side: str, n: int, tag: str) -> list:
        """Start `n` runs of `side` directly, 20 at a time, and wait for each to close."""
        limit = asyncio.Semaphore(20)
        job = bench_job(self.args.job)
        if side == "ours":  # a job per run, as in the direct case (`direct_job`)
            self.catalog.started_directly(f"{tag}-{i}" for i in range(n))

        async def one(i: int):
            async with limit:
                wid = f"{tag}-{i}"
                if side == "raw":
                    handle = await self.client.start_workflow(
                        RawWorkflow.run, id=wid, task_queue=self.raw_queue
                    )
                elif side == "seed":
                    handle = await self.client.start_workflow(
                        SeedWorkflow.run, wid, id=wid, task_queue=self.seed_queue
                    )
                else:
                    run = job_run(job).model_copy(update={"job_name": wid})
                    handle = await self.client.start_workflow(
                        workflow_for(run), run, id=wid, task_queue=self.our_queue
                    )
                await handle.result()
                return handle

        return await asyncio.gather(*(one(i) for i in range(n)))

    async def cost(self, side: str, round_: int) -> dict[str, float]:
        """Per-run resources of `--cost-runs` runs started directly, counted (see run_cost).

        `--warmup` runs first, outside the window, at the same concurrency: the workers'
        connection pools grow to what the load needs (each new connection's `configure`
        is a transaction of its own, no run's) and their caches fill, so the window
        measures the steady state. The `configure` transactions left in the window are
        counted apart (`pool_xacts`) and `pg_xacts` is the rest."""
        n = self.args.cost_runs
        database = {"ours": "fleet", "seed": "fleet_seed"}.get(side)
        admin = self.pg.url()
        server = self.temporal.process.pid
        postmaster = run_cost.postmaster_pid(self.pg.data_dir)
        if self.args.warmup:
            await self._runs(side, self.args.warmup, f"{side}-w{round_}-{uuid.uuid4().hex[:4]}")
            await asyncio.sleep(11)  # the warm-up's counts reach pg_stat_database (below)

        def snapshot() -> dict[str, float]:
            counts = run_cost.pg_counts(admin, database) if database else (0, 0, 0)
            calls = run_cost.server_calls(self.metrics_url)
            return {
                "server_calls": calls["frontend"],
                "matched_activities": calls["matched_activities"],
                "server_cpu": run_cost.tree_cpu_seconds(server),
                "worker_cpu": sum(run_cost.cpu_seconds(pid) for pid in self.pids[side]),
                "pg_cpu": run_cost.tree_cpu_seconds(postmaster),
                "pg_xacts": counts[0] - counts[2],
                "pool_xacts": counts[2],
                "pg_statements": counts[1],
            }

        profiles = self._profile(side, f"cost{round_ + 1}")
        before = snapshot()
        handles = await self._runs(side, n, f"{side}-c{round_}-{uuid.uuid4().hex[:4]}")
        after_cpu = {
            "server_cpu": run_cost.tree_cpu_seconds(server),
            "worker_cpu": sum(run_cost.cpu_seconds(pid) for pid in self.pids[side]),
            "pg_cpu": run_cost.tree_cpu_seconds(postmaster),
        }
        self._stop_profiles(profiles)
        # A backend reports its transaction counts to pg_stat_database when it has been idle
        # a while (PGSTAT_IDLE_INTERVAL, 10 s), not at each commit: wait that out. CPU is
        # read before the wait, so only the runs' window counts.
        await asyncio.sleep(11)
        after = snapshot() | after_cpu
        per_run = {key: (after[key] - before[key]) / n for key in before}
        sample = handles[:: max(1, n // 20)]
        costs = [run_cost.history_cost(await h.fetch_history()) for h in sample]
        for key in ("events", "workflow_tasks", "activities", "local_activities"):
            per_run[key] = statistics.mean(getattr(c, key) for c in costs)
        per_run["payload_in"] = statistics.mean(c.payload_in for c in costs)
        per_run["payload_out"] = statistics.mean(c.payload_out for c in costs)
        return per_run


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


SIDES = ("raw", "seed", "ours")
CPU_PARTS = ("workers", "postgres", "bench")  # the other core's CPU (`Fleet._cpu`)
# The side's workers' CPU by thread (`run_cost.thread_cpu_seconds`).
THREAD_KINDS = run_cost.THREAD_KINDS
GC_KINDS = ("gc_young", "gc_full")  # `--gc-probe` (`Fleet._gc_seconds`)
# Workflow tasks no poll was waiting for: matching persisted each and read it back.
BACKLOG_LABEL = (
    "the same, workflow tasks matching backlogged per run (no poll waiting): a run's later "
    "ones, on the worker that caches it (sticky) / its first"
)


async def run(args: argparse.Namespace) -> tuple[str, AuditResult | None]:
    """Every round's cases, then the audit of ours' side: the results section, and the
    audit's result (None: ours ran no job)."""
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="fleet-") as tmp:
        fleet = Fleet(args, Path(tmp))
        await fleet.start()
        try:
            direct, backfill = Figures(), Figures()
            latencies: dict[str, list[float]] = {side: [] for side in SIDES}
            costs: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES}
            for r in range(args.rounds):
                # Rotated each round, so a trend in the machine's load weighs on every side.
                order = SIDES[r % 3 :] + SIDES[: r % 3]
                for side in order if "cost" in args.cases else ():
                    costs[side].append(await fleet.cost(side, r))
                    print(f"round {r + 1} cost {side}: {costs[side][-1]}", file=sys.stderr)
                for k in range(args.direct_repeats if "direct" in args.cases else 0):
                    sample = r * args.direct_repeats + k  # names this repeat's runs
                    for side in order[k % 3 :] + order[: k % 3]:
                        rate = await fleet.direct(side, sample)
                        getattr(direct, side).append(rate)
                        print(f"round {r + 1} direct {side}: {rate:.1f} wf/s", file=sys.stderr)
                for side in order if "backfill" in args.cases else ():
                    rate = await fleet.backfill(side, r)
                    getattr(backfill, side).append(rate)
                    print(f"round {r + 1} backfill {side}: {rate:.1f} wf/s", file=sys.stderr)
                if args.latency_seconds > 0 and "latency" in args.cases:
                    for side in order:
                        found = await fleet.latency(side, r)
                        latencies[side] += found
                        print(
                            f"round {r + 1} latency {side}: {len(found)} runs, "
                            f"p50 {quantile(found, 0.5):.3f}s",
                            file=sys.stderr,
                        )
            audit = judge_ours(fleet)
        finally:
            fleet.stop()
    section = render(args, load, fleet, direct, backfill, latencies, costs, audit)
    end = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    section = section.replace("\nMachine:", f"\nLoad average at the end: {end}.\n\nMachine:", 1)
    return section, audit


def judge_ours(fleet: Fleet) -> AuditResult | None:
    """`python -m schedules audit` over every job ours ran (`fleet_audit`), while the
    servers still run; its verdict on stderr, every finding with it."""
    if not len(fleet.catalog):
        return None
    audit = audit_ours(fleet.catalog, fleet.workdir, fleet.audit_env)
    print(f"audit of ours' side: {audit.headline()}", file=sys.stderr)
    for line in audit.finding_lines():
        print(f"  {line}", file=sys.stderr)
    return audit


COST_ROWS = (
    ("history events", "events", "{:.1f}"),
    ("workflow tasks", "workflow_tasks", "{:.1f}"),
    ("activity tasks (through the server)", "activities", "{:.1f}"),
    (
        "... of them dispatched through matching (not started eagerly)",
        "matched_activities",
        "{:.2f}",
    ),
    ("calls the server's frontend served (polls apart)", "server_calls", "{:.2f}"),
    ("local activities", "local_activities", "{:.1f}"),
    ("payload bytes in (inputs)", "payload_in", "{:.0f}"),
    ("payload bytes out (results, markers)", "payload_out", "{:.0f}"),
    ("PostgreSQL transactions (the runs')", "pg_xacts", "{:.2f}"),
    ("PostgreSQL transactions configuring a new pooled connection", "pool_xacts", "{:.2f}"),
    ("PostgreSQL statements", "pg_statements", "{:.2f}"),
    ("CPU ms, Temporal server", "server_cpu", "{:.1f}"),
    ("CPU ms, the side's workers", "worker_cpu", "{:.1f}"),
    ("CPU ms, PostgreSQL", "pg_cpu", "{:.1f}"),
)


def _met(ok: bool) -> str:
    return "**met**" if ok else "**missed**"


def render(args, load, fleet, direct: Figures, backfill: Figures, latencies, costs, audit) -> str:
    def rates(values: list[float]) -> str:
        return ", ".join(f"{v:.1f}" for v in values)

    def ratio(figures: Figures, base: str = "raw") -> float:
        return statistics.median(figures.ours) / statistics.median(getattr(figures, base))

    def median_cost(side: str, key: str) -> float:
        value = statistics.median(c[key] for c in costs[side])
        return value * 1000 if key.endswith("_cpu") else value

    def median_direct_cpu(side: str, core: str) -> float:
        return statistics.median(c[core] for c in fleet.direct_cpu[side])

    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    pinned = (
        f"The dev server pinned to CPU {sorted(fleet.server_cores)}, PostgreSQL, the workers "
        f"and the bench to CPU {sorted(fleet.other_cores)} (`--pin`)"
        if fleet.server_cores != fleet.other_cores
        else "No pinning (one core, or `--no-pin`)"
    )
    # Counted before the bench pinned itself to the other cores (`nproc` would say fewer).
    machine = describe_machine() | {"CPUs": str(os.cpu_count())}
    machine.pop("CPUs (nproc)", None)
    parts = []
    if costs["ours"]:
        cost_lines = "\n".join(
            f"| {label} | "
            + " | ".join(fmt.format(median_cost(side, key)) for side in SIDES)
            + " |"
            for label, key, fmt in COST_ROWS
        )
        events = median_cost("ours", "events") - median_cost("raw", "events")
        xacts = median_cost("ours", "pg_xacts") - median_cost("seed", "pg_xacts")
        server = median_cost("ours", "server_cpu") / max(median_cost("raw", "server_cpu"), 1e-9)
        parts.append(f"""Per run ({args.cost_runs} runs started directly per side and round after
{args.warmup} not counted, medians of {args.rounds} rounds; history figures from a sample
of each side's runs):

| per run | raw Temporal | seed pattern | ours |
| --- | ---: | ---: | ---: |
{cost_lines}

Targets: ours <= seed + 1 transaction: {_met(xacts <= 1)} ({xacts:+.2f});{chunked_target(args, median_cost("ours", "pg_xacts"))}
ours <= raw + 4 history events: {_met(events <= 4)} ({events:+.1f});
server CPU per run <= 1.25x raw: {_met(server <= 1.25)} ({server:.2f}x).
""")
    rows = []
    if direct.ours:
        d, ds = ratio(direct), ratio(direct, "seed")
        rows.append(
            f"| {args.workflows} workflows started directly, wf/s ({len(direct.ours)} times a "
            f"side) | {rates(direct.raw)} | "
            f"{rates(direct.seed)} | {rates(direct.ours)} | {d:.2f}x ({ds:.2f}x seed) | "
            f">= 0.9x raw and >= 1.0x seed: {_met(d >= 0.9 and ds >= 1.0)}"
            f"{'; >= 1.0x raw (issue 42): ' + _met(d >= 1.0) if args.job != BENCH_JOB else ''} |"
        )
        # Each repeat ran the three sides back to back: its ratios share the machine's state.
        paired = {
            base: [o / b for o, b in zip(direct.ours, getattr(direct, base), strict=True)]
            for base in ("raw", "seed")
        }
        rows.append(
            f"| the same, paired: ours / the other side within each repeat (median; repeats "
            f"ours was ahead) | {statistics.median(paired['raw']):.2f}x "
            f"({sum(r >= 1 for r in paired['raw'])} of {len(paired['raw'])}) | "
            f"{statistics.median(paired['seed']):.2f}x "
            f"({sum(r >= 1 for r in paired['seed'])} of {len(paired['seed'])}) | | | |"
        )
        ms = {
            side: (median_direct_cpu(side, "server"), median_direct_cpu(side, "other"))
            for side in SIDES
        }
        # What the two cores could sustain if nothing else ran: 1 s of CPU over the busier
        # core's CPU per run. Load-independent where the wall clock is not.
        cap = {side: 1000 / max(ms[side]) for side in SIDES}
        rows.append(
            "| the same, CPU ms per run on the server's core / the other core | "
            + " | ".join(f"{ms[side][0]:.1f} / {ms[side][1]:.1f}" for side in SIDES)
            + " | | |"
        )

        def parts_row(label: str, keys: tuple[str, ...], digits: int = 1) -> str:
            """A row of CPU ms per run split into `keys`, a side a column."""
            split = (
                " / ".join(f"{median_direct_cpu(side, key):.{digits}f}" for key in keys)
                for side in SIDES
            )
            return f"| {label} | " + " | ".join(split) + " | | |"

        rows.append(
            parts_row(
                "... the other core's: the side's workers / PostgreSQL / this bench", CPU_PARTS
            )
        )
        rows.append(
            parts_row(
                "... the side's workers by thread: event loop / Python threads (workflow "
                "activations) / SDK core",
                THREAD_KINDS,
            )
        )
        if args.gc_probe:
            label = (
                "... of it, the workers' garbage collector: young generations / full "
                "collections (`--gc-probe`)"
            )
            rows.append(parts_row(label, GC_KINDS, digits=2))
        rows.append(
            "| the same, activity tasks dispatched through matching per run (not eager) | "
            + " | ".join(f"{median_direct_cpu(side, 'matched_activities'):.2f}" for side in SIDES)
            + " | | |"
        )
        rows.append(parts_row(BACKLOG_LABEL, ("backlogged_sticky", "backlogged_normal"), 2))
        rows.append(
            "| the same, wf/s the two cores sustain (1000 / the busier core's ms) | "
            + " | ".join(f"{cap[side]:.1f}" for side in SIDES)
            + f" | {cap['ours'] / cap['raw']:.2f}x ({cap['ours'] / cap['seed']:.2f}x seed) | "
            f">= 0.9x raw and >= 1.0x seed: "
            f"{_met(cap['ours'] >= 0.9 * cap['raw'] and cap['ours'] >= cap['seed'])} |"
        )
    if backfill.ours:
        b = ratio(backfill)
        rows.append(
            f"| {args.backfill} slots backfilled through a schedule, wf/s | "
            f"{rates(backfill.raw)} | {rates(backfill.seed)} | {rates(backfill.ours)} | "
            f"{b:.2f}x | >= 0.95x: {_met(b >= 0.95)} |"
        )
    if latencies["ours"]:
        p50 = {side: quantile(latencies[side], 0.5) for side in SIDES}
        p99 = {side: quantile(latencies[side], 0.99) for side in SIDES}
        gap = (p50["ours"] - p50["raw"]) * 1000
        rows.append(
            f"| fire latency p50, s ({', '.join(str(len(latencies[s])) for s in SIDES)} runs) "
            f"| {p50['raw']:.3f} | {p50['seed']:.3f} | {p50['ours']:.3f} | {gap:+.0f} ms | "
            f"within 50 ms: {_met(gap <= 50)} |"
        )
        rows.append(
            f"| fire latency p99, s | {p99['raw']:.3f} | {p99['seed']:.3f} | {p99['ours']:.3f} "
            f"| | under 1 s: {_met(p99['ours'] < 1)} |"
        )
    if rows:
        table = "\n".join(rows)
        parts.append(f"""| case | raw (each round) | seed (each round) | ours (each round) | ours / raw (medians) | target |
| --- | --- | --- | --- | ---: | --- |
{table}
""")
    parts.append(audit_lines(audit))
    body = "\n".join(parts)
    telemetry = (
        "telemetry on as in production: spans made for their ids, no exporter, metrics "
        "served; `WORKER_ROLE=jobs`"
        if args.telemetry
        else "**telemetry off** (`--no-telemetry`: not as production runs it)"
    )
    return f"""
## Fleet: run of {when}, {args.workers} worker processes a side

Written by `bench/fleet.py` (see its docstring): raw Temporal (one no-op activity), the
seed's pattern written by hand (`bench/fleet_seed.py`: one activity, one transaction), and
ours ({ours_job(args)}, {telemetry}; the seed
side runs nightly-reconcile's statement).
{pinned}. Command, from the repository root:

{provenance(machine, load)}

{body}
Latency: raw, from the slot (TemporalScheduledStartTime) to the no-op activity's start;
seed and ours, from the slot to the claim's `job_executions` row (PostgreSQL's clock at
insert). PostgreSQL CPU is the whole cluster's during the side's window (the other sides'
workers are idle then); server CPU includes every side's idle polls.
"""


def ours_job(args) -> str:
    """What ours' side ran (`--job`)."""
    if args.job == BENCH_JOB:
        return "`LocalTransactionJobWorkflow`, nightly-reconcile on empty tables"
    return (
        f"`ChunkedJobWorkflow`, invoice-reminders over {args.invoices} overdue invoices "
        "reminded within the week, one chunk of work a run"
    )


def chunked_target(args, xacts: float) -> str:
    """Issue 42's transactions target, for a chunked job's small runs (`--job`)."""
    if args.job == BENCH_JOB:
        return ""
    return f"\nours <= 1.5 transactions a run (issue 42): {_met(xacts <= 1.5)} ({xacts:.2f});"


def audit_lines(audit: AuditResult | None) -> str:
    """The section's verdict of `schedules audit` on ours' side (and what it found)."""
    if audit is None:
        return "Audit of ours' side: ours ran no job, nothing to judge.\n"
    lines = [f"Audit of ours' side (`bench/fleet_audit.py`): {audit.headline()}."]
    if not audit.clean:
        quoted = audit.finding_lines(QUOTED)
        lines += ["", "```", *quoted, "```"] if quoted else []
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--workflows", type=int, default=300)
    parser.add_argument(
        "--direct-repeats", type=int, default=3, help="direct cases a side in each round"
    )
    parser.add_argument("--backfill", type=int, default=100)
    parser.add_argument("--latency-seconds", type=float, default=60.0, help="0: skip")
    parser.add_argument("--cost-runs", type=int, default=300)
    parser.add_argument(
        "--job", choices=JOBS, default=BENCH_JOB, help="the catalog job ours' side runs"
    )
    parser.add_argument(
        "--invoices",
        type=int,
        default=100,
        help="--job invoice-reminders: overdue invoices in ours' table (one chunk: <= 5000)",
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=100,
        help="runs per side before each cost window, not counted (pools grown, caches warm)",
    )
    parser.add_argument(
        "--cases",
        type=lambda text: set(text.split(",")),
        default={"cost", "direct", "backfill", "latency"},
        help="comma-separated subset of cost,direct,backfill,latency (default: all)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="py-spy each side's first worker during the cost window and each direct case, "
        "into this folder "
        "(needs py-spy in the venv: .venv/bin/pip install py-spy)",
    )
    parser.add_argument(
        "--pin",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the dev server on a core of its own, everything else on the others",
    )
    parser.add_argument(
        "--telemetry",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="ours with traces and metrics, as production (--no-telemetry: to see their cost)",
    )
    parser.add_argument(
        "--gc-probe",
        action="store_true",
        help="time every process's garbage collector (bench/gc_probe) and report the "
        "workers' in the direct case",
    )
    parser.add_argument("--output", type=Path, default=today())
    parser.add_argument("--no-output", action="store_true", help="print only")
    args = parser.parse_args(argv)
    section, audit = asyncio.run(run(args))
    print(section)
    if not args.no_output:
        write_results(args.output, section)
    if audit is not None and not audit.clean:
        print(f"error: the audit of ours' side is not clean: {audit.headline()}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
