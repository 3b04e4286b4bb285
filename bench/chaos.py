"""A first chaos suite, judged by `schedules audit` (issue 18, part 4; a skeleton: two fault
classes of the issue's ten).

Each trial runs on real servers: one embedded PostgreSQL (a fresh database per trial,
cloned from a migrated template) and one headless Temporal dev server, two `python -m
worker` processes on a task queue of the trial's own, and one run of invoice-reminders
over `--invoices` overdue invoices in chunks (a short heartbeat timeout, so a take-over
comes soon). While the run works (at least two chunks committed), the fault hits the
worker process that holds the slot:

- `sigkill-mid-chunk`: SIGKILL; the other worker's retry takes over and resumes;
- `sigstop-past-heartbeat`: SIGSTOP until the other worker completed the slot after its
  take-over, then SIGCONT: the frozen attempt wakes holding a stale token.

Then `schedules.audit.run_audit` judges the trial's history (`--settle 0s`, the trial's
window), and the effects are counted: each invoice reminded once. The table (trials, slots,
findings by kind, effects wrong) goes to `--output` (bench/RESULTS.md).

    .venv/bin/python bench/chaos.py --trials 10
    .venv/bin/python bench/chaos.py --trials 1 --no-output   # one short trial per class

Left for later (the issue's other classes): PostgreSQL restart, pg_terminate_backend of the
workers' sessions, Temporal restart, a worker cut from Temporal only (a TCP proxy), rolling
restarts during a backfill, the monthly-billing charge step killed, the payment provider
killed with charges on the wire.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import psycopg
from sync_schedules import (
    BenchError,
    bench_main,
    dev_server,
    positive,
    provenance,
    say,
    scratch_dir,
)

from devstack import EmbeddedPostgres, free_port
from schedules.audit import run_audit
from schedules.catalog import RetrySpec, default_catalog
from schedules.sync import sync
from worker.migrate import apply_migrations

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_OUTPUT = HERE / "RESULTS.md"
TEMPLATE = "chaos_template"
DEADLINE = 180.0  # seconds any one wait of a trial may take


@dataclass
class Trial:
    fault: str
    slots: int = 1
    findings: Counter = field(default_factory=Counter)
    wrong_effects: int = 0
    attempts: int = 0  # the slot's fencing token at the end: above 1, a take-over happened
    seconds: float = 0.0


class Worker:
    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log
        self._out = log.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "worker"],
            cwd=ROOT,
            env=env,
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    def ready(self) -> bool:
        return b"worker ready" in self.log.read_bytes()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._out.close()


async def until(check: Callable[[], Awaitable[object] | object], what: str) -> object:
    """Poll `check` until it returns something truthy, within DEADLINE."""
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        await asyncio.sleep(0.1)
    raise BenchError(f"timed out waiting for {what}")


def row(url: str, job_id: str) -> dict | None:
    with psycopg.connect(url) as conn:
        cur = conn.cursor(row_factory=psycopg.rows.dict_row)
        return cur.execute("SELECT * FROM job_executions WHERE job_name = %s", (job_id,)).fetchone()


def wrong_effects(url: str, invoices: int) -> int:
    """Invoices reminded other than once."""
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT %s - count(*) FILTER (WHERE n = 1) FROM (SELECT count(*) AS n FROM"
            " outbox_messages GROUP BY payload->>'invoice_number') per",
            (invoices,),
        ).fetchone()[0]


async def trial(fault: str, pg: EmbeddedPostgres, client, address: str, n: int, args, workdir):
    url = pg.create_database(f"chaos_{n}", template=TEMPLATE)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO invoices (invoice_number, customer_email, status, due_date)"
            " SELECT 'INV-' || lpad(i::text, 8, '0'), 'c' || i || '@example.com', 'Unpaid', %s"
            " FROM generate_series(1, %s) AS i",
            (date.today() - timedelta(days=10), args.invoices),
        )
    queue = f"chaos-{uuid.uuid4().hex[:12]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "DATABASE_"))}
    env |= {
        "TEMPORAL_ADDRESS": address,
        "TEMPORAL_TASK_QUEUE": queue,
        "DATABASE_URL": url,
        "WORKER_GRACEFUL_SHUTDOWN_SECONDS": "5",
        "DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS": "3600",
    }
    base = default_catalog()["invoice-reminders"]
    job = base.model_copy(
        update={
            "params": base.params | {"chunk_size": 500, "pause_between_chunks_ms": 200},
            "heartbeat": timedelta(seconds=3),
            "retry": RetrySpec(
                initial_interval=timedelta(seconds=0.5), maximum_interval=timedelta(seconds=2)
            ),
            "paused": True,
        }
    )
    workers = [Worker(env, workdir / f"w{n}-{i}.log") for i in range(2)]
    started = time.monotonic()
    result = Trial(fault)
    try:
        await until(lambda: all(w.ready() for w in workers), "the workers")
        await sync(client, [job], queue, prune=False)
        await client.get_schedule_handle(job.id).trigger()
        working = await until(
            lambda: (
                (r := row(url, job.id))
                and r["progress"].get("counts", {}).get("chunks", 0) >= 2
                and r["holder"]
                and r
            ),
            "two chunks",
        )
        pid = int(working["holder"].rsplit(":", 1)[1])
        holder = next(w for w in workers if w.process.pid == pid)
        holder.process.send_signal(
            signal.SIGKILL if fault == "sigkill-mid-chunk" else signal.SIGSTOP
        )
        done = await until(
            lambda: (r := row(url, job.id)) and r["status"] == "completed" and r, "completion"
        )
        if fault == "sigstop-past-heartbeat":
            holder.process.send_signal(signal.SIGCONT)
            await until(
                lambda: (
                    b"is stale" in holder.log.read_bytes()
                    or b"ctivity cancel" in holder.log.read_bytes()
                    or b"not running" in holder.log.read_bytes()
                ),
                "the woken worker to give up its attempt",
            )
        report = await run_audit(
            url,
            client,
            [job],
            task_queue=queue,
            now=datetime.now(UTC),
            start=done["scheduled_at"] - timedelta(seconds=1),
            settle=timedelta(0),
        )
        result.findings = Counter(f.kind for f in report.findings)
        result.wrong_effects = wrong_effects(url, args.invoices)
        result.attempts = done["attempt"]
    finally:
        for w in workers:
            w.stop()
        try:
            await client.get_schedule_handle(job.id).delete()
        except Exception:  # a trial that failed before its sync
            pass
    result.seconds = time.monotonic() - started
    return result


FAULTS = ("sigkill-mid-chunk", "sigstop-past-heartbeat")


async def run(args: argparse.Namespace) -> list[Trial]:
    trials = []
    with scratch_dir("bench-chaos-", "the servers' and workers' logs") as workdir:
        pg = EmbeddedPostgres(workdir / "pg", free_port())
        pg.start()
        try:
            apply_migrations(pg.create_database(TEMPLATE))
            async with dev_server(workdir / "temporal.log") as (client, _pid):
                address = client.service_client.config.target_host
                for fault in args.faults:
                    for i in range(args.trials):
                        number = len(trials)
                        t = await trial(fault, pg, client, address, number, args, workdir)
                        trials.append(t)
                        say(
                            f"{fault} #{i + 1}: {dict(t.findings) or 'no finding'}, "
                            f"{t.wrong_effects} wrong effect(s), {t.seconds:.0f}s"
                        )
        finally:
            pg.stop("immediate")
    return trials


def render(trials: list[Trial], machine: dict[str, str], when: datetime, load) -> str:
    lines = []
    for fault in dict.fromkeys(t.fault for t in trials):
        of = [t for t in trials if t.fault == fault]
        kinds = sum((t.findings for t in of), Counter())
        lines.append(
            f"| {fault} | {len(of)} | {sum(t.slots for t in of)} | "
            f"{', '.join(f'{k} {v}' for k, v in sorted(kinds.items())) or '0'} | "
            f"{sum(t.wrong_effects for t in of)} | "
            f"{sum(1 for t in of if t.attempts > 1)} | {max(t.seconds for t in of):.0f} |"
        )
    table = "\n".join(lines)
    return f"""
## Chaos, judged by the audit: run of {when:%Y-%m-%d %H:%M} UTC

{provenance(machine, load)}

Each trial: one invoice-reminders run over its own invoices, on two worker processes;
the fault hits the holder of the slot after two chunks; then `schedules audit`
(`run_audit`, settle 0s) judges the trial's window, and each invoice must be reminded
exactly once.

| fault class | trials | slots | findings by kind | invoices reminded other than once | trials with a take-over | slowest trial (s) |
| --- | ---: | ---: | --- | ---: | ---: | ---: |
{table}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=positive, default=10, help="trials per fault class")
    parser.add_argument("--faults", nargs="+", choices=FAULTS, default=list(FAULTS))
    parser.add_argument("--invoices", type=positive, default=3000)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--no-output", action="store_true")
    args = parser.parse_args(argv)
    return bench_main(args, run, render)


if __name__ == "__main__":
    sys.exit(main())
