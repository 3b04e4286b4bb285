"""The chaos suite: faults injected into real runs, each trial's whole history judged.

Every trial runs a real job on real servers (its own Temporal dev server with a state file,
its own PostgreSQL, real `python -m worker` processes), injects one fault class at a point
the trial controls (the chunk gate, `activities/chunks/gate.py`, or the payment provider's
hold), lets the system recover, and is then judged twice:

- by `python -m schedules audit --settle 0s --json` for the trial's job (an independent
  checker: lost, duplicated, unexpected, stale_write, orphan_running, ...), when this
  checkout has it;
- by the trial's own oracle on the domain: every invoice reminded exactly once (one outbox
  message per invoice), or, for billing, every charge the provider made on a Paid invoice
  and never on a Void one, each key charged at most once.

    .venv/bin/python bench/chaos.py --trials 10                 # every fault class
    .venv/bin/python bench/chaos.py --trials 3 --faults kill,zombie
    .venv/bin/python bench/chaos.py --seed 42 --trials 3 --plan-only  # the plan, not run

Every choice is drawn from one seed (`bench/chaos_plan.py`): the order of the trials, how
many chunks each gated run does before its fault lands, the delays around it. The seed and
its plan are printed first (a seed not given is drawn and printed); the same seed, classes
and trial count give the same plan. A trial that ends with a violation or a finding prints
the one command that replays it (`--only N`: trial N of the same plan, as planned).

It prints one line per trial and a table (trials, slots, findings by kind, domain
violations) per fault class, and with `--write` appends the table to
bench/results/<UTC date>.md.
Not part of `make test`: a trial takes 20 to 90 s on this machine.

`dispatch-kill` and `dispatch-double` judge the runtime schedules' dispatcher (issue 21):
its worker killed between a decision's commit and its starts, and two dispatchers of one
shard ticking at once; every runtime slot of the minute must run once (the audit of the
runtime schedules, and one completed row and at most one report email per slot).
`runtime-kill` (issue 36) kills the worker of twenty per-slot runtime slots with their work
in flight: each must complete once, on the other worker, within its kind's allowance.
`clock-ahead` and `clock-behind` (issue 41) run the slot's holder with its wall clock 5
minutes ahead of or behind the machine's (PostgreSQL's and Temporal's), moved by Debian's
`faketime` library (`apt-get install faketime`); it is killed at its planned chunk and a
worker with the true clock takes over and finishes. `clock-step` steps the holder's clock
during its run, as NTP steps one: forward at its planned chunk, back behind the true time a
chunk later, true again a chunk later (faketime reads the offset from a file the trial
replaces). `dispatch-skew` runs the runtime dispatcher's worker 5 minutes ahead or behind
(the plan says which) while 40 runtime slots fire on it and on a worker with the true
clock: each must run once, none past its kind's allowance.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import psycopg
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client, ScheduleBackfill, ScheduleOverlapPolicy

from core.payloads import data_converter

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from bench.chaos_plan import TrialPlan, plan, replay_command, shown  # noqa: E402
from bench.results_file import append, today  # noqa: E402
from devstack import EmbeddedPostgres, TemporalDevServer, free_port  # noqa: E402
from devstack.payments import PaymentProviderServer  # noqa: E402
from jobs import runtime_kinds  # noqa: E402
from schedules.catalog.model import JobSpec, RetrySpec, default_catalog  # noqa: E402
from schedules.sync.attributes import runtime_attributes  # noqa: E402
from tests.helpers.worker import WorkerProcess  # noqa: E402
from tests.integration import billing  # noqa: E402
from tests.integration.chunk_gate import ChunkGate  # noqa: E402
from tests.integration.jobs import insert_invoices, registered  # noqa: E402
from tests.integration.namespaces import fresh_namespace  # noqa: E402
from tests.integration.runtime import dispatcher, insert_schedule, tick_all  # noqa: E402
from worker.migrate import apply_migrations  # noqa: E402

TEMPLATE = "chaos_template"
OVERDUE = date.today() - timedelta(days=10)
HEARTBEAT = timedelta(seconds=3)
RETRY = RetrySpec(
    maximum_attempts=20,
    initial_interval=timedelta(seconds=0.5),
    maximum_interval=timedelta(seconds=1),
)


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def eventually(check: Callable[[], object], timeout: float, what: str):
    """Poll `check` (a function, or a coroutine function) until it returns a truthy value;
    raise naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise TrialError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(0.1)


class TrialError(Exception):
    """The trial could not be carried out as planned (not a finding about the system)."""


class Blackhole:
    """A TCP proxy to `target` that can stop forwarding without closing anything: the
    worker behind it keeps its connections and hears nothing, as across a partition."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self._flowing = threading.Event()
        self._flowing.set()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cut(self) -> None:
        self._flowing.clear()

    def heal(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        self._stop = True
        self._flowing.set()
        self._listener.close()

    def _accept(self) -> None:
        while not self._stop:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                self._flowing.wait()
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)


@dataclass
class Verdict:
    fault: str
    slots: int
    findings: Counter = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    # The highest fencing token among the trial's slots: above 1, an attempt took over.
    takeovers: int = 0


class Stack:
    """The servers every trial shares; each trial gets a fresh database and task queue."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.pg = EmbeddedPostgres(workdir / "pg", free_port())
        self.temporal = TemporalDevServer(
            free_port(), None, workdir / "temporal.db", workdir / "temporal.log"
        )
        self.client: Client | None = None
        self._n = 0

    async def start(self) -> None:
        self.pg.start()
        self.pg.create_database(TEMPLATE)
        apply_migrations(self.pg.url(TEMPLATE))
        self.temporal.start()
        await self.temporal.wait_ready()
        self.client = await self.connect()

    async def connect(self) -> Client:
        return await Client.connect(self.temporal.address, data_converter=data_converter)

    async def restart_temporal(self) -> None:
        self.temporal.stop()
        self.temporal.start()
        await self.temporal.wait_ready(120)

    def restart_postgres(self) -> None:
        self.pg.stop("fast")
        self.pg.start()

    def stop(self) -> None:
        self.temporal.stop()
        self.pg.stop("immediate")

    def database(self) -> str:
        self._n += 1
        return self.pg.create_database(f"trial_{self._n}", template=TEMPLATE)


class Trial:
    """One trial's database, task queue, workers and judgement."""

    def __init__(self, stack: Stack, planned: TrialPlan) -> None:
        self.stack, self.plan, self.fault = stack, planned, planned.fault
        self.client: Client | None = None  # of the trial's own namespace: see `open`
        self.namespace = ""
        self.url = stack.database()
        self.db = psycopg.connect(self.url, autocommit=True)
        self.task_queue = f"chaos-{uuid.uuid4().hex[:10]}"
        self.logs = stack.workdir / self.task_queue
        self.logs.mkdir()
        self.workers: list[WorkerProcess] = []
        self.gate = ChunkGate(self.url)

    async def open(self) -> None:
        """A namespace of the trial's own: the audit sees this trial's runs only."""
        self.client = await fresh_namespace(self.stack.client, "chaos")
        self.namespace = self.client.namespace

    async def reconnect(self) -> None:
        self.client = await Client.connect(
            self.stack.temporal.address,
            namespace=self.namespace,
            data_converter=data_converter,
        )

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "DATABASE_"))}
        env.update(
            TEMPORAL_ADDRESS=self.stack.temporal.address,
            TEMPORAL_NAMESPACE=self.namespace,
            TEMPORAL_TASK_QUEUE=self.task_queue,
            DATABASE_URL=self.url,
            WORKER_GRACEFUL_SHUTDOWN_SECONDS="30",
            PYTHONUNBUFFERED="1",
            **self.gate.env,
        )
        env.update(extra)
        return env

    async def start_workers(self, n: int, **extra: str) -> list[WorkerProcess]:
        batch = [
            WorkerProcess(self.env(**extra), self.logs / f"worker-{len(self.workers) + i}.log")
            for i in range(n)
        ]
        self.workers.extend(batch)
        for w in batch:
            await asyncio.to_thread(w.wait_ready, 90)
        return batch

    def close(self) -> None:
        for w in self.workers:
            w.stop()
        self.gate.close()
        self.db.close()

    # --- reading the record -------------------------------------------------------------

    def rows(self, job: str) -> list[dict]:
        cur = self.db.cursor(row_factory=psycopg.rows.dict_row)
        return cur.execute(
            "SELECT * FROM job_executions WHERE job_name = %s ORDER BY scheduled_at", (job,)
        ).fetchall()

    def max_attempt(self) -> int:
        return self.db.execute("SELECT coalesce(max(attempt), 0) FROM job_executions").fetchone()[0]

    def holder(self, job: str) -> int | None:
        rows = [r for r in self.rows(job) if r["status"] == "running" and r["holder"]]
        return int(rows[0]["holder"].rsplit(":", 1)[1]) if rows else None

    async def held_after_chunks(self) -> None:
        """Let the gated run do its planned chunks, hold it there, wait the planned delay:
        where the trial's fault lands."""
        await self.gate.reached()
        for _ in range(self.plan.chunks):
            self.gate.step()
            await self.gate.reached()
        await asyncio.sleep(self.plan.delay)

    async def settled(self, job: str, slots: int, timeout: float = 240) -> None:
        async def done():
            rows = self.rows(job)
            return len(rows) >= slots and all(r["status"] != "running" for r in rows)

        await eventually(done, timeout, f"{slots} slot(s) of {job} settled")

    async def pending_work(self, workflow_id: str, activity: str):
        run = self.client.get_workflow_handle(workflow_id)
        pending = (await run.describe()).raw_description.pending_activities
        return next((p for p in pending if p.activity_type.name == activity), None)

    # --- judging ------------------------------------------------------------------------

    def audit(self, job: str) -> tuple[Counter, str | None]:
        """Findings of `schedules audit` by kind (None: this checkout has no audit)."""
        env = self.env()
        done = subprocess.run(
            [sys.executable, "-m", "schedules", "audit", "--job", job, "--settle", "0s", "--json"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode == 2 and "invalid choice" in done.stderr:
            return Counter(), "no audit in this checkout"
        if done.returncode not in (0, 1):
            return Counter(), f"audit could not read (exit {done.returncode}): {done.stderr[-300:]}"
        kinds = Counter()
        for line in done.stdout.splitlines():
            record = json.loads(line)
            if record.get("kind") and record.get("kind") != "summary":
                kinds[record["kind"]] += 1
        if done.returncode == 1 and not kinds:
            kinds["unparsed"] += 1
        return kinds, None

    def reminders_once(self, total: int) -> list[str]:
        outbox, distinct, reminded = self.db.execute(
            "SELECT count(*), count(DISTINCT payload->>'invoice_number'),"
            " (SELECT count(*) FROM invoices WHERE last_reminder_at IS NOT NULL)"
            " FROM outbox_messages WHERE type = 'InvoiceReminder'"
        ).fetchone()
        problems = []
        if outbox != total or distinct != total:
            problems.append(f"{outbox} reminders for {distinct} of {total} invoices")
        if reminded != total:
            problems.append(f"{reminded} of {total} invoices marked reminded")
        return problems

    def completed(self, job: str, slots: int) -> list[str]:
        rows = self.rows(job)
        bad = [
            f"{r['scheduled_at']:%H:%M}Z {r['status']}" for r in rows if r["status"] != "completed"
        ]
        problems = [f"not completed: {', '.join(bad)}"] if bad else []
        if len(rows) != slots:
            problems.append(f"{len(rows)} ledger rows for {slots} slots")
        return problems


def reminders_job(job_id: str | None = None, **params) -> JobSpec:
    job = default_catalog()["invoice-reminders"]
    return job.model_copy(
        update={
            "id": job_id or job.id,
            "params": job.params | {"chunk_size": 500} | params,
            "heartbeat": HEARTBEAT,
            "retry": RETRY,
            "paused": True,
            "note": "chaos: triggered and backfilled runs only",
        }
    )


# --- fault classes -------------------------------------------------------------------------


async def one_reminder_run(
    trial: Trial,
    inject: Callable[[Trial, JobSpec], Awaitable[None]],
    *,
    workers: int = 2,
    total: int = 5_000,
    worker_env: dict[str, str] | None = None,
    job: JobSpec | None = None,
) -> Verdict:
    """Trigger invoice-reminders once, inject the fault after two chunks, judge the slot."""
    insert_invoices(trial.db, total, due=OVERDUE)
    job = job or reminders_job()
    if workers:
        await trial.start_workers(workers, **(worker_env or {}))
    async with registered(trial.client, job, trial.task_queue):
        await trial.client.get_schedule_handle(job.id).trigger()
        if workers:
            await trial.held_after_chunks()
        await inject(trial, job)
        trial.gate.open()
        await trial.settled(job.id, 1)
        findings, note = trial.audit(job.id)
    verdict = Verdict(
        trial.fault, 1, findings, trial.completed(job.id, 1) + trial.reminders_once(total)
    )
    verdict.error = note
    return verdict


async def kill(trial: Trial) -> Verdict:
    async def inject(trial: Trial, job: JobSpec) -> None:
        os.kill(trial.holder(job.id), signal.SIGKILL)

    return await one_reminder_run(trial, inject, workers=3)


async def freeze(trial: Trial) -> Verdict:
    """SIGSTOP the holder past its heartbeat timeout; SIGCONT once another took over."""

    async def inject(trial: Trial, job: JobSpec) -> None:
        pid = trial.holder(job.id)
        frozen = next(w for w in trial.workers if w.pid == pid)
        frozen.signal(signal.SIGSTOP)
        try:
            await eventually(lambda: trial.holder(job.id) not in (None, pid), 120, "a take-over")
        finally:
            frozen.signal(signal.SIGCONT)

    return await one_reminder_run(
        trial, inject, worker_env={"DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS": "3600"}
    )


async def zombie(trial: Trial) -> Verdict:
    """The holder frozen while it is the only worker polling: its open polls absorb retries;
    a second worker takes over; the first is woken with those attempts buffered."""
    insert_invoices(trial.db, 4_000, due=OVERDUE)
    job = reminders_job()
    env = {
        "WORKER_MAX_CONCURRENT_ACTIVITIES": "3",
        "DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS": "3600",
    }
    (frozen,) = await trial.start_workers(1, **env)
    async with registered(trial.client, job, trial.task_queue):
        await trial.client.get_schedule_handle(job.id).trigger()
        await trial.held_after_chunks()
        workflow_id = trial.rows(job.id)[0]["workflow_id"]
        frozen.signal(signal.SIGSTOP)
        try:

            async def retried():
                work = await trial.pending_work(workflow_id, job.activity)
                return work is not None and work.attempt >= 3

            await eventually(retried, 120, "retries absorbed by the frozen worker")
            (live,) = await trial.start_workers(1, **env)
            await eventually(lambda: trial.holder(job.id) == live.pid, 120, "a take-over")
            await trial.gate.reached(2)
        finally:
            frozen.signal(signal.SIGCONT)
        trial.gate.open()
        await trial.settled(job.id, 1)
        findings, note = trial.audit(job.id)
    v = Verdict(trial.fault, 1, findings, trial.completed(job.id, 1) + trial.reminders_once(4_000))
    v.error = note
    return v


async def absorb(trial: Trial) -> Verdict:
    """A short-heartbeat job whose every retry lands in a frozen worker's open polls."""
    insert_invoices(trial.db, 3_000, due=OVERDUE)
    attempts = 4
    job = reminders_job().model_copy(
        update={"retry": RETRY.model_copy(update={"maximum_attempts": attempts})}
    )
    env = {
        "WORKER_MAX_CONCURRENT_ACTIVITIES": str(attempts),
        "DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS": "3600",
    }
    (frozen,) = await trial.start_workers(1, **env)
    async with registered(trial.client, job, trial.task_queue):
        await trial.client.get_schedule_handle(job.id).trigger()
        await trial.gate.reached()
        await asyncio.sleep(trial.plan.delay)
        workflow_id = trial.rows(job.id)[0]["workflow_id"]
        frozen.signal(signal.SIGSTOP)
        try:

            async def all_handed_out():
                work = await trial.pending_work(workflow_id, job.activity)
                return (
                    work is not None
                    and work.attempt == attempts
                    and work.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
                )

            await eventually(all_handed_out, 120, "every retry handed to the frozen worker")
            await trial.start_workers(1, **env)
            trial.gate.open()
            await trial.settled(job.id, 1)
        finally:
            frozen.signal(signal.SIGCONT)
        findings, note = trial.audit(job.id)
    v = Verdict(trial.fault, 1, findings, trial.completed(job.id, 1) + trial.reminders_once(3_000))
    v.error = note
    return v


async def pg_terminate(trial: Trial) -> Verdict:
    async def inject(trial: Trial, job: JobSpec) -> None:
        # Every session of the workers, the test's own two (this one, the gate's) spared.
        trial.db.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid() AND pid <> %s",
            (trial.gate.backend_pid,),
        )

    return await one_reminder_run(trial, inject)


async def pg_restart(trial: Trial) -> Verdict:
    async def inject(trial: Trial, job: JobSpec) -> None:
        trial.db.close()
        trial.stack.restart_postgres()
        trial.db = psycopg.connect(trial.url, autocommit=True)
        trial.gate = _reopened_gate(trial)

    return await one_reminder_run(trial, inject)


async def temporal_restart(trial: Trial) -> Verdict:
    async def inject(trial: Trial, job: JobSpec) -> None:
        await trial.stack.restart_temporal()
        trial.stack.client = await trial.stack.connect()
        await trial.reconnect()

    return await one_reminder_run(trial, inject)


async def partition(trial: Trial) -> Verdict:
    """The holder cut from Temporal (a blackholing proxy), not from PostgreSQL."""
    host, port = trial.stack.temporal.address.rsplit(":", 1)
    proxy = Blackhole((host, int(port)))
    try:
        insert_invoices(trial.db, 5_000, due=OVERDUE)
        job = reminders_job()
        (cut,) = await trial.start_workers(1, TEMPORAL_ADDRESS=proxy.address)
        async with registered(trial.client, job, trial.task_queue):
            await trial.client.get_schedule_handle(job.id).trigger()
            await trial.held_after_chunks()
            if trial.holder(job.id) != cut.pid:
                raise TrialError("the worker behind the proxy does not hold the slot")
            proxy.cut()
            (live,) = await trial.start_workers(1)
            await eventually(lambda: trial.holder(job.id) == live.pid, 120, "a take-over")
            trial.gate.open()
            await trial.settled(job.id, 1)
            proxy.heal()
            findings, note = trial.audit(job.id)
        v = Verdict(
            trial.fault, 1, findings, trial.completed(job.id, 1) + trial.reminders_once(5_000)
        )
        v.error = note
        return v
    finally:
        proxy.close()


# Debian's faketime (`apt-get install faketime`): its library moves the real clock of the
# process it is preloaded in, as the `faketime` command does.
FAKETIME_LIB = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


def skewed_clock(offset: str) -> dict[str, str]:
    """A worker's environment whose wall clock runs `offset` (`+5m`, `-5m`) from the
    machine's, PostgreSQL's and Temporal's; its monotonic clock is left alone."""
    if not FAKETIME_LIB.exists():
        raise TrialError(f"needs Debian's faketime ({FAKETIME_LIB}): apt-get install faketime")
    return {
        "LD_PRELOAD": str(FAKETIME_LIB),
        "FAKETIME": offset,
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }


async def skewed_holder(trial: Trial, offset: str) -> Verdict:
    """The slot claimed and worked by a worker whose clock is `offset` off; SIGKILLed at
    its planned chunk, a worker with the true clock takes over and finishes."""
    insert_invoices(trial.db, 5_000, due=OVERDUE)
    job = reminders_job()
    (skewed,) = await trial.start_workers(1, **skewed_clock(offset))
    async with registered(trial.client, job, trial.task_queue):
        await trial.client.get_schedule_handle(job.id).trigger()
        await trial.held_after_chunks()
        if trial.holder(job.id) != skewed.pid:
            raise TrialError("the skewed worker does not hold the slot")
        (true,) = await trial.start_workers(1)
        skewed.signal(signal.SIGKILL)
        await eventually(lambda: trial.holder(job.id) == true.pid, 120, "a take-over")
        trial.gate.open()
        await trial.settled(job.id, 1)
        findings, note = trial.audit(job.id)
    v = Verdict(trial.fault, 1, findings, trial.completed(job.id, 1) + trial.reminders_once(5_000))
    v.error = note
    return v


async def clock_ahead(trial: Trial) -> Verdict:
    return await skewed_holder(trial, "+5m")


async def clock_behind(trial: Trial) -> Verdict:
    return await skewed_holder(trial, "-5m")


class SteppedClock:
    """A worker's wall clock that the trial steps while it runs, as NTP steps a clock:
    faketime reads its offset from a file at every call (FAKETIME_TIMESTAMP_FILE with
    FAKETIME_NO_CACHE), and `step` replaces the file whole (a rename), so no call reads
    half an offset. The monotonic clock is left alone, as a step leaves it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.step("+0")

    @property
    def env(self) -> dict[str, str]:
        env = skewed_clock("+0")
        del env["FAKETIME"]
        return env | {"FAKETIME_TIMESTAMP_FILE": str(self.path), "FAKETIME_NO_CACHE": "1"}

    def step(self, offset: str) -> None:
        fresh = self.path.with_suffix(".new")
        fresh.write_text(offset + "\n")
        os.replace(fresh, self.path)


async def clock_step(trial: Trial) -> Verdict:
    """The slot's holder has its clock stepped during its chunked run: at its planned chunk
    forward by the plan's first step, a chunk later back to the plan's second step behind
    the true time, a chunk later true again; it finishes the run itself."""
    clock = SteppedClock(trial.logs / "faketime")
    insert_invoices(trial.db, 5_000, due=OVERDUE)
    job = reminders_job()
    (stepped,) = await trial.start_workers(1, **clock.env)
    forward, back = trial.plan.step
    async with registered(trial.client, job, trial.task_queue):
        await trial.client.get_schedule_handle(job.id).trigger()
        await trial.held_after_chunks()
        if trial.holder(job.id) != stepped.pid:
            raise TrialError("the stepped worker does not hold the slot")
        for offset in (f"+{forward}m", f"-{back}m", "+0"):
            clock.step(offset)
            trial.gate.step()
            await trial.gate.reached()
        trial.gate.open()
        await trial.settled(job.id, 1)
        findings, note = trial.audit(job.id)
    v = Verdict(trial.fault, 1, findings, trial.completed(job.id, 1) + trial.reminders_once(5_000))
    v.error = note
    return v


async def dispatch_skew(trial: Trial) -> Verdict:
    """The dispatcher's worker runs with its wall clock the plan's `skew` minutes off
    PostgreSQL's and the server's, and runs runtime slots too, beside a worker with the true
    clock (of the jobs queue only, so the dispatcher is always the skewed one). Every
    runtime slot of the minute must run once, and none later than its kind allows."""
    await runtime_attributes(trial.client, register=True)
    minute, slots = runtime_schedules(trial, shard=3)
    job = dispatcher_job(3)
    await trial.start_workers(1, WORKER_ROLE="all", **skewed_clock(f"{trial.plan.skew:+d}m"))
    await trial.start_workers(1, WORKER_ROLE="jobs")
    async with registered(trial.client, job, trial.task_queue):
        await trial.client.get_schedule_handle(job.id).trigger()
        await trial.gate.reached()  # the dispatcher has decided: its starts follow
        await asyncio.sleep(trial.plan.delay)
        trial.gate.open()
        await trial.settled(job.id, 1)
        await eventually(lambda: not runtime_running(trial, slots), 240, "runtime slots settled")
        findings, note = runtime_audit(trial, minute)
    problems = trial.completed(job.id, 1) + runtime_once(trial, slots)
    v = Verdict(trial.fault, slots, findings, problems + runtime_late(trial))
    v.error = note
    return v


def runtime_late(trial: Trial) -> list[str]:
    """Runtime slots that began past their kind's allowance after their time, by
    PostgreSQL's clock: a skewed clock must not make a slot late."""
    allowance = {name: kind.allowance for name, kind in runtime_kinds().items()}
    began = trial.db.execute(
        "SELECT s.kind, e.started_at - e.scheduled_at FROM job_executions e"
        " JOIN runtime_schedules s ON e.job_name = 'rt-' || s.id"
    ).fetchall()
    late = Counter(kind for kind, waited in began if waited and waited > allowance[kind])
    return [f"{n} {kind} slot(s) began past their allowance" for kind, n in sorted(late.items())]


async def rolling(trial: Trial) -> Verdict:
    """Rolling restarts of every worker (SIGTERM, then a new one) during a backfill of the
    6 last nights of invoice-reminders (the catalog's 02:30 London)."""
    slots = 6
    insert_invoices(trial.db, 6_000, due=OVERDUE)
    # 30 chunks a slot, 100 ms apart: the backfill outlasts the three rounds of restarts.
    job = reminders_job(chunk_size=200, pause_between_chunks_ms=100)
    trial.gate.open()  # no gating: the restarts land wherever the runs are
    await trial.start_workers(2)
    # Six days hold six nightly fire times, whatever the hour now (no DST change in them
    # is assumed: `settled` waits for as many slots as the backfill started).
    end = datetime.now(UTC) - timedelta(hours=12)
    async with registered(trial.client, job, trial.task_queue):
        await trial.client.get_schedule_handle(job.id).backfill(
            ScheduleBackfill(
                start_at=end - timedelta(days=slots),
                end_at=end,
                overlap=ScheduleOverlapPolicy.BUFFER_ALL,
            )
        )
        for _ in range(3):
            for old in list(trial.workers):
                if old.process.poll() is not None:
                    continue
                old.signal(signal.SIGTERM)
                await trial.start_workers(1)
                await asyncio.to_thread(old.process.wait, 90)
                await asyncio.sleep(trial.plan.pause)
        await trial.settled(job.id, slots)
        findings, note = trial.audit(job.id)
    v = Verdict(trial.fault, slots, findings, trial.completed(job.id, slots))
    # The first slot reminds every invoice; later ones find them reminded within the window.
    v.error = note
    return v


async def billing_run(
    trial: Trial,
    inject: Callable[[Trial, PaymentProviderServer], Awaitable[None]],
    *,
    prepare: Callable[[PaymentProviderServer], None],
) -> Verdict:
    """Bill September 2026 for 30 subscriptions (a backfill of the monthly-billing slot),
    with the fault injected while charges are on the wire; judged against the provider's
    own record: no invoice it charged ends Void here, no key is charged twice."""
    provider = PaymentProviderServer(free_port())
    provider.start()
    try:
        trial.gate.open()  # billing has no chunk gate: the provider's hold places the fault
        active = billing.subscribe(trial.db, 30)
        prepare(provider)
        await trial.start_workers(1, PAYMENTS_URL=provider.url)
        async with registered(trial.client, billing.billing_job(), trial.task_queue):
            await billing.backfill(trial.client)

            async def on_the_wire():
                return provider.arrived.is_set() or bool(provider.charged())

            await eventually(on_the_wire, 120, "a charge on the wire")
            await asyncio.sleep(trial.plan.delay)
            await inject(trial, provider)
            await trial.settled(billing.JOB, 1, timeout=300)
            findings, note = trial.audit(billing.JOB)
        status = dict(
            trial.db.execute(
                "SELECT invoice_number, status FROM invoices WHERE billing_month = %s",
                (billing.MONTH,),
            ).fetchall()
        )
        charged = provider.charged()
        violations = []
        void = sorted(k for k in charged if status.get(k) == "Void")
        if void:
            violations.append(f"{len(void)} invoices charged at the provider and Void: {void[:5]}")
        twice = sorted(k for k, n in charged.items() if n > 1)
        if twice:
            violations.append(f"{len(twice)} keys charged twice")
        unpaid = sorted(k for k in charged if status.get(k) != "Paid")
        if unpaid:
            violations.append(f"{len(unpaid)} charged invoices not Paid")
        (row,) = trial.rows(billing.JOB)
        if row["status"] == "completed" and len(charged) != active:
            violations.append(f"completed with {len(charged)} of {active} charged")
        verdict = Verdict(trial.fault, 1, findings, violations)
        verdict.error = note
        return verdict
    finally:
        provider.stop()


async def charge_kill(trial: Trial) -> Verdict:
    """The worker SIGKILLed while its charges wait at the provider; another resumes."""

    async def inject(trial: Trial, provider: PaymentProviderServer) -> None:
        (first,) = trial.workers
        first.signal(signal.SIGKILL)
        await asyncio.to_thread(first.process.wait, 30)
        await trial.start_workers(1, PAYMENTS_URL=provider.url)
        provider.release()

    return await billing_run(trial, inject, prepare=lambda provider: provider.hold())


async def provider_kill(trial: Trial) -> Verdict:
    """The provider dies with charges made and unanswered and stays down past the step's
    retries (the run compensates, or waits for a lookup), then comes back with its record."""

    async def inject(trial: Trial, provider: PaymentProviderServer) -> None:
        provider.kill()

        async def gave_up_or_looking_up():
            rows = trial.rows(billing.JOB)
            if rows and rows[0]["status"] != "running":
                return True
            with contextlib.suppress(Exception):
                described = await trial.client.get_workflow_handle(
                    f"{billing.WORKFLOW_ID}/steps"
                ).describe()
                return any(
                    a.activity_type.name == "void_uncharged_invoices" and a.attempt >= 2
                    for a in described.raw_description.pending_activities
                )
            return False

        await eventually(gave_up_or_looking_up, 240, "the charge step to give up")
        provider.start()

    return await billing_run(trial, inject, prepare=lambda provider: provider.hold_answers())


def runtime_schedules(trial: Trial, shard: int, count: int = 40) -> tuple[datetime, int]:
    """`count` every-minute runtime schedules of one shard (half per-slot weekly reports,
    half test-noop in batches), due this minute; returns the minute and how many."""
    minute = datetime.now(UTC).replace(second=0, microsecond=0)
    for i in range(count * 4):
        reports = i // 4 % 2
        owned = (
            trial.db.execute(  # a weekly report names its own tenant's customer
                "INSERT INTO customers (tenant, name, email, timezone)"
                " VALUES (%s, 'Chaos', 'chaos@example.com', 'UTC') RETURNING id",
                (f"t{i}",),
            ).fetchone()[0]
            if reports
            else None
        )
        sid = insert_schedule(
            trial.db, tenant=f"t{i}", name="every-minute",
            kind="weekly-report" if reports else "test-noop",
            params={"customer_id": owned} if reports else {},
            cron="* * * * *", timezone="UTC", next_fire_at=minute, timing_since=minute,
            end_at=minute,  # one fire time: a tick in the next minute finds only this one
        )  # fmt: skip
        if sid % 4 != shard:
            trial.db.execute("DELETE FROM runtime_schedules WHERE id = %s", (sid,))
    return minute, count


def runtime_audit(trial: Trial, minute: datetime) -> tuple[Counter, str | None]:
    """`schedules audit` of the runtime schedules (and catalog jobs) over this minute."""
    done = subprocess.run(
        [sys.executable, "-m", "schedules", "audit", "--settle", "0s", "--json",
         "--from", f"{minute:%Y-%m-%dT%H:%M:%SZ}",
         "--to", f"{minute + timedelta(minutes=1):%Y-%m-%dT%H:%M:%SZ}"],
        cwd=ROOT, env=trial.env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if done.returncode not in (0, 1):
        return Counter(), f"audit could not read (exit {done.returncode}): {done.stderr[-300:]}"
    records = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = Counter(r["kind"] for r in records if r.get("kind") not in (None, "summary"))
    if done.returncode == 1 and not kinds:
        kinds["unparsed"] += 1
    return kinds, None


def runtime_once(trial: Trial, slots: int) -> list[str]:
    done, distinct, duplicates = trial.db.execute(
        "SELECT count(*) FILTER (WHERE status = 'completed'), count(DISTINCT job_name),"
        " coalesce(sum(duplicate_runs), 0) FROM job_executions WHERE job_name ~ '^rt-'"
    ).fetchone()
    emails, reports = trial.db.execute(
        "SELECT (SELECT count(*) FROM outbox_messages WHERE type = 'WeeklyReport'),"
        " (SELECT count(*) FROM runtime_schedules WHERE kind = 'weekly-report')"
    ).fetchone()
    problems = []
    if (done, distinct) != (slots, slots):
        problems.append(f"{done} completed rows for {distinct} of {slots} runtime slots")
    if emails != reports or not reports:
        problems.append(f"{emails} weekly reports for {reports} report slots")
    if duplicates:
        problems.append(f"{duplicates} duplicate runs")
    return problems


def dispatcher_job(shard: int, job_id: str | None = None) -> JobSpec:
    job = default_catalog()[f"runtime-dispatch-{shard}"]
    return job.model_copy(
        update={"id": job_id or job.id, "heartbeat": HEARTBEAT, "retry": RETRY,
                "paused": True, "note": "chaos: triggered ticks only",
                "params": job.params | {"max_seconds": 0}}  # one tick a run, no session
    )  # fmt: skip


async def dispatch_kill(trial: Trial) -> Verdict:
    """The dispatcher's worker SIGKILLed between its decision's commit and its starts."""
    await runtime_attributes(trial.client, register=True)
    minute, slots = runtime_schedules(trial, shard=1)
    job = dispatcher_job(1)
    await trial.start_workers(2)
    async with registered(trial.client, job, trial.task_queue):
        await trial.client.get_schedule_handle(job.id).trigger()
        await trial.gate.reached()
        await asyncio.sleep(trial.plan.delay)
        os.kill(trial.holder(job.id), signal.SIGKILL)
        trial.gate.open()
        await trial.settled(job.id, 1)
        await eventually(lambda: not runtime_running(trial, slots), 240, "runtime slots settled")
        findings, note = runtime_audit(trial, minute)
    v = Verdict(
        trial.fault, slots, findings, trial.completed(job.id, 1) + runtime_once(trial, slots)
    )
    v.error = note
    return v


async def dispatch_double(trial: Trial) -> Verdict:
    """Two dispatchers of one shard tick at once (a second schedule with the same params)."""
    await runtime_attributes(trial.client, register=True)
    minute, slots = runtime_schedules(trial, shard=2)
    trial.gate.open()
    await trial.start_workers(2)
    one, two = dispatcher_job(2), dispatcher_job(2, "runtime-dispatch-2-twin")
    async with (
        registered(trial.client, one, trial.task_queue),
        registered(trial.client, two, trial.task_queue),
    ):
        await asyncio.gather(
            *(trial.client.get_schedule_handle(j.id).trigger() for j in (one, two))
        )
        await trial.settled(one.id, 1)
        await trial.settled(two.id, 1)
        await eventually(lambda: not runtime_running(trial, slots), 240, "runtime slots settled")
        findings, note = runtime_audit(trial, minute)
    problems = trial.completed(one.id, 1) + trial.completed(two.id, 1)
    v = Verdict(trial.fault, slots, findings, problems + runtime_once(trial, slots))
    v.error = note
    return v


async def runtime_kill(trial: Trial) -> Verdict:
    """A per-slot runtime kind's worker SIGKILLed with its slots' work in flight: twenty
    weekly reports, each inside its one transaction, queued behind the trial's lock on
    `weekly_reports`; a second worker started, the first killed, the lock released. Every
    slot must complete once, within its kind's allowance (`RuntimeKind.allowance`)."""
    await runtime_attributes(trial.client, register=True)
    minute = datetime.now(UTC).replace(second=0, microsecond=0)
    slots = 20
    for i in range(slots):
        customer = trial.db.execute(
            "INSERT INTO customers (tenant, name, email, timezone)"
            " VALUES (%s, 'Chaos', 'chaos@example.com', 'UTC') RETURNING id",
            (f"t{i}",),
        ).fetchone()[0]
        insert_schedule(
            trial.db, tenant=f"t{i}", name="weekly", kind="weekly-report",
            params={"customer_id": customer}, cron="* * * * *", timezone="UTC",
            next_fire_at=minute, timing_since=minute, end_at=minute,
        )  # fmt: skip
    trial.gate.open()
    pool = {"DATABASE_POOL_SIZE": "30"}  # a connection for each slot's transaction
    (lost,) = await trial.start_workers(1, **pool)
    with psycopg.connect(trial.url) as lock:
        lock.execute("LOCK TABLE weekly_reports IN EXCLUSIVE MODE")
        async with dispatcher(trial.url, trial.client, trial.task_queue, batches=False) as d:
            await tick_all(d, minute)
        pid = lock.info.backend_pid
        await eventually(
            lambda: (
                trial.db.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
                    (pid,),
                ).fetchone()[0]
                == slots
            ),
            120,
            "every slot's work queued behind the lock",
        )
        await trial.start_workers(1, **pool)
        await asyncio.sleep(trial.plan.delay)
        lost.signal(signal.SIGKILL)
        lock.rollback()
    await eventually(lambda: not runtime_running(trial, slots), 240, "runtime slots settled")
    findings, note = runtime_audit(trial, minute)
    allowance = runtime_kinds()["weekly-report"].allowance
    over = trial.db.execute(
        "SELECT count(*) FROM job_executions WHERE job_name ~ '^rt-'"
        " AND finished_at - greatest(scheduled_at, started_at) > %s",
        (allowance,),
    ).fetchone()[0]
    problems = runtime_once(trial, slots)
    if over:
        problems.append(f"{over} slot(s) completed past their kind's allowance ({allowance})")
    v = Verdict(trial.fault, slots, findings, problems)
    v.error = note
    return v


def runtime_running(trial: Trial, slots: int) -> bool:
    """Whether any of the `slots` runtime slots is still to settle."""
    terminal = trial.db.execute(
        "SELECT count(*) FROM job_executions WHERE job_name ~ '^rt-' AND status <> 'running'"
    ).fetchone()[0]
    return terminal < slots


def _reopened_gate(trial: Trial) -> ChunkGate:
    """The gate's own session may have been ended with the others: take it anew, open."""
    with contextlib.suppress(Exception):
        trial.gate.close()
    gate = ChunkGate(trial.url)
    return gate


FAULTS: dict[str, Callable[[Trial], Awaitable[Verdict]]] = {
    "kill": kill,
    "freeze": freeze,
    "zombie": zombie,
    "absorb": absorb,
    "pg-terminate": pg_terminate,
    "pg-restart": pg_restart,
    "temporal-restart": temporal_restart,
    "partition": partition,
    "rolling": rolling,
    "charge-kill": charge_kill,
    "provider-kill": provider_kill,
    "dispatch-kill": dispatch_kill,
    "dispatch-double": dispatch_double,
    "runtime-kill": runtime_kill,
    "clock-ahead": clock_ahead,
    "clock-behind": clock_behind,
    "clock-step": clock_step,
    "dispatch-skew": dispatch_skew,
}


def planned(args: argparse.Namespace) -> list[TrialPlan]:
    """The plan of this invocation: every trial of the seed's plan, or the one `--only` names."""
    trials = plan(args.seed, args.faults, args.trials)
    return [t for t in trials if args.only in (None, t.number)]


def show_plan(args: argparse.Namespace) -> None:
    print("\n".join(shown(args.seed, args.faults, args.trials, args.only)), flush=True)


async def run(args: argparse.Namespace) -> list[Verdict]:
    workdir = Path(tempfile.mkdtemp(prefix="chaos-"))
    stack = Stack(workdir)
    verdicts = []
    try:
        await stack.start()
        for planned_trial in planned(args):
            fault, n = planned_trial.fault, planned_trial.number
            trial = Trial(stack, planned_trial)
            began = time.monotonic()
            try:
                await trial.open()
                verdict = await FAULTS[fault](trial)
                if verdict.error and "could not read" in verdict.error:
                    verdict.violations.append("not judged: the audit could not read")
            except Exception as exc:  # a trial that could not finish (TrialError among them)
                verdict = Verdict(fault, 0, error=f"{type(exc).__name__}: {exc}")
                verdict.violations.append("trial did not finish")
            finally:
                with contextlib.suppress(Exception):
                    verdict.takeovers = trial.max_attempt()
                trial.close()
            verdict.seconds = time.monotonic() - began
            verdicts.append(verdict)
            say(
                f"{fault} #{n}: {verdict.slots} slot(s), findings {dict(verdict.findings) or 0},"
                f" violations {verdict.violations or 0}"
                + (f" ({verdict.error})" if verdict.error else "")
                + f", fencing token {verdict.takeovers}, {verdict.seconds:.0f}s"
            )
            if failed(verdict):
                say(f"replay: {replay_command(args.seed, args.faults, args.trials, n)}")
    finally:
        stack.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            say(f"logs kept in {workdir}")
    return verdicts


def render(verdicts: list[Verdict], args: argparse.Namespace) -> str:
    lines = [
        f"### Chaos suite ({datetime.now(UTC):%Y-%m-%d})",
        "",
        f"Command: `.venv/bin/python bench/chaos.py --seed {args.seed} --trials {args.trials} "
        f"--faults {','.join(args.faults)}`; machine: {os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.1f} at the end.",
        "",
        "| fault | trials | slots | trials with a take-over | audit findings | domain violations "
        "| median s |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for fault in dict.fromkeys(v.fault for v in verdicts):
        mine = [v for v in verdicts if v.fault == fault]
        found = sum((v.findings for v in mine), Counter())
        broken = sum(1 for v in mine if v.violations)
        seconds = sorted(v.seconds for v in mine)
        lines.append(
            f"| {fault} | {len(mine)} | {sum(v.slots for v in mine)} | "
            f"{sum(1 for v in mine if v.takeovers > 1)} | "
            f"{', '.join(f'{k} {n}' for k, n in sorted(found.items())) or '0'} | {broken} | "
            f"{seconds[len(seconds) // 2]:.0f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument(
        "--faults",
        type=lambda s: s.split(","),
        default=list(FAULTS),
        help=f"comma-separated, of: {', '.join(FAULTS)}",
    )
    parser.add_argument("--write", action="store_true", help="append to bench/results/<date>.md")
    parser.add_argument("--keep", action="store_true", help="keep the servers' and workers' logs")
    parser.add_argument(
        "--seed", type=int, default=None, help="draw every choice from this seed (default: drawn)"
    )
    parser.add_argument("--only", type=int, default=None, help="run trial N of the plan only")
    parser.add_argument("--plan-only", action="store_true", help="print the plan; run nothing")
    args = parser.parse_args(argv)
    unknown = [f for f in args.faults if f not in FAULTS]
    if unknown or args.trials < 1:
        parser.error(f"--faults: unknown {unknown}" if unknown else "--trials must be >= 1")
    if args.only is not None and not 1 <= args.only <= args.trials * len(args.faults):
        parser.error(f"--only: the plan has trials 1 to {args.trials * len(args.faults)}")
    if args.seed is None:
        args.seed = secrets.randbelow(2**31)
    show_plan(args)
    if args.plan_only:
        return 0
    verdicts = asyncio.run(run(args))
    table = render(verdicts, args)
    print(table)
    if args.write:
        append(today(), "\n" + table)
    return 1 if any(failed(v) for v in verdicts) else 0


def failed(verdict: Verdict) -> bool:
    """A violation, or an audit finding other than lateness (a loaded machine's)."""
    return bool(verdict.violations or set(verdict.findings) - {"late"})


if __name__ == "__main__":
    sys.exit(main())
