"""Runtime schedules (issue 21): `tenants import` of N schedules, and the latency of
create / update / pause with 100,000 stored.

In one embedded PostgreSQL (migrated with `worker.migrate.apply_migrations`), a database
per size:

1. import: a JSON Lines file of N schedules (1,000 per tenant, the default quota; crons,
   20 zones and params varied) run as an operator does, `python -m schedules tenants
   import FILE` in a subprocess, timed by the wall clock (the process's start included);
   then the same file again, which must create nothing (idempotent), timed too;
2. latency, in the database of the largest import: `--calls` calls each of
   `schedules.tenants.create` (new schedules of tenants with room), `update` (a cron
   change at the version just read, which recomputes the next slot) and `pause`, one at a
   time over one connection held by the caller, as an application holds one from its
   pool; p50, p99 and max of each call's time.

Targets (issue 21): 100,000 imported in at most 60 s; p99 of each call at most 20 ms.

    .venv/bin/python bench/runtime_schedules.py --sizes 1000 10000 100000 --calls 3000
    .venv/bin/python bench/runtime_schedules.py --sizes 1000 --calls 200 --no-output  # smoke
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import psycopg
from results_file import today
from sync_schedules import (  # bench/ is sys.path[0] when run as a script
    BenchError,
    bench_main,
    positive,
    provenance,
    say,
    scratch_dir,
)

from devstack import EmbeddedPostgres, free_port
from schedules import tenants
from schedules.tenants import Quotas
from worker.migrate import apply_migrations

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ZONES = [
    "America/New_York", "America/Chicago", "America/Denver", "America/Los_Angeles",
    "America/Sao_Paulo", "America/Santiago", "Europe/London", "Europe/Paris",
    "Europe/Berlin", "Europe/Helsinki", "Africa/Cairo", "Asia/Dubai", "Asia/Kolkata",
    "Asia/Singapore", "Asia/Tokyo", "Australia/Sydney", "Australia/Lord_Howe",
    "Pacific/Auckland", "Pacific/Honolulu", "UTC",
]  # fmt: skip
PER_TENANT = 1000
TARGET_IMPORT = timedelta(seconds=60)
TARGET_P99_MS = 20.0


@dataclass
class Imported:
    size: int
    seconds: float
    again_seconds: float

    @property
    def rate(self) -> float:
        return self.size / self.seconds


@dataclass
class Result:
    imports: list[Imported] = field(default_factory=list)
    stored: int = 0
    latencies: dict[str, list[float]] = field(default_factory=dict)


def line(i: int, tenant_prefix: str = "customer") -> dict:
    return {
        "tenant": f"{tenant_prefix}-{i // PER_TENANT}",
        "name": f"weekly-report-{i}",
        "kind": "test-noop",
        "cron": f"{i % 60} {i % 24} * * {i % 7}" if i % 3 else f"*/{5 + i % 25} * * * *",
        "timezone": ZONES[i % len(ZONES)],
        "params": {"label": f"customer {i}", "size": 1 + i % 50},
        "catchup": ["skip", "latest", "all"][i % 3],
        **({"max_missed": 3} if i % 3 == 2 else {}),
        "paused": i % 50 == 0,
    }


def run_import(url: str, path: Path) -> tuple[float, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "TENANT_"))}
    env["DATABASE_URL"] = url
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "schedules", "tenants", "import", str(path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise BenchError(f"import of {path.name} exited {done.returncode}: {done.stderr[-500:]}")
    return seconds, done.stdout.strip()


def bench_import(pg: EmbeddedPostgres, size: int, workdir: Path) -> tuple[Imported, str]:
    url = pg.create_database(f"import_{size}")
    apply_migrations(url)
    path = workdir / f"schedules-{size}.jsonl"
    path.write_text("".join(json.dumps(line(i)) + "\n" for i in range(size)))
    say(f"import of {size}: {path.stat().st_size / 1e6:.1f} MB")
    seconds, out = run_import(url, path)
    if out != f"imported {size} line(s): {size} created, 0 already there":
        raise BenchError(f"import of {size}: {out!r}")
    again, out = run_import(url, path)
    if out != f"imported {size} line(s): 0 created, {size} already there":
        raise BenchError(f"re-import of {size}: {out!r}")
    with psycopg.connect(url) as conn:
        stored = conn.execute("SELECT count(*) FROM runtime_schedules").fetchone()[0]
    if stored != size:
        raise BenchError(f"import of {size}: {stored} rows stored")
    say(f"  {seconds:.1f} s ({size / seconds:,.0f}/s), again {again:.1f} s")
    return Imported(size, seconds, again), url


async def bench_latency(url: str, calls: int) -> dict[str, list[float]]:
    quotas = Quotas()
    found: dict[str, list[float]] = {"create": [], "update": [], "pause": []}
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        ids: list[tuple[int, int]] = []
        for i in range(calls):
            data = line(i, tenant_prefix="latency") | {"paused": False}
            started = time.perf_counter()
            outcome = await tenants.create(conn, data, by="bench", quotas=quotas)
            found["create"].append(time.perf_counter() - started)
            ids.append((outcome.schedule.id, outcome.schedule.version))
        for i, (sid, version) in enumerate(ids):
            started = time.perf_counter()
            await tenants.update(
                conn, sid, version, {"cron": f"{(i + 7) % 60} 9 * * 1"}, by="bench", quotas=quotas
            )
            found["update"].append(time.perf_counter() - started)
        for sid, _ in ids:
            started = time.perf_counter()
            await tenants.pause(conn, sid, "bench: paused", by="bench")
            found["pause"].append(time.perf_counter() - started)
    return found


async def bench(args: argparse.Namespace) -> Result:
    result = Result()
    with scratch_dir("bench-runtime-schedules-", "PostgreSQL's data") as workdir:
        pg = EmbeddedPostgres(workdir / "pg", free_port())
        pg.start()
        try:
            url = ""
            for size in args.sizes:
                imported, url = bench_import(pg, size, workdir)
                result.imports.append(imported)
            result.stored = max(args.sizes)
            say(f"latency: {args.calls} calls each, {result.stored:,} stored")
            result.latencies = await bench_latency(url, args.calls)
        finally:
            pg.stop("immediate")
    return result


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)] * 1000


def render(result: Result, machine: dict[str, str], when: datetime, load) -> str:
    rows = "\n".join(
        f"| {i.size:,} | {i.seconds:.1f} | {i.rate:,.0f} | {i.again_seconds:.1f} |"
        for i in result.imports
    )
    calls = "\n".join(
        f"| {name} | {len(v):,} | {statistics.median(v) * 1000:.2f} | {_ms(v, 0.99):.2f} | "
        f"{max(v) * 1000:.2f} |"
        for name, v in result.latencies.items()
    )
    biggest = max(result.imports, key=lambda i: i.size)
    worst = max(_ms(v, 0.99) for v in result.latencies.values())
    verdicts = [
        f"import of {biggest.size:,}: {biggest.seconds:.1f} s, target "
        f"{TARGET_IMPORT.total_seconds():.0f} s: "
        f"{'met' if biggest.seconds <= TARGET_IMPORT.total_seconds() else 'NOT met'}",
        f"worst p99 {worst:.2f} ms, target {TARGET_P99_MS:.0f} ms: "
        f"{'met' if worst <= TARGET_P99_MS else 'NOT met'}",
    ]
    verdict_lines = "\n".join(f"- {v}" for v in verdicts)
    return f"""
## Runtime schedules: import and create / update / pause latency ({when:%Y-%m-%d %H:%M} UTC)

{provenance(machine, load)}

`python -m schedules tenants import FILE` (a subprocess, wall clock, start-up included),
JSON Lines, 1,000 schedules per tenant; "again" is the same file re-imported (creates
nothing):

| schedules | import s | per second | again s |
| --- | --- | --- | --- |
{rows}

One call at a time over one connection the caller holds, {result.stored:,} schedules stored
(each call its own transaction: the tenant's lock, the row, the change log):

| call | calls | p50 ms | p99 ms | max ms |
| --- | --- | --- | --- | --- |
{calls}

{verdict_lines}
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=positive, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--calls", type=positive, default=3000, help="per kind of call")
    parser.add_argument("--output", type=Path, default=today())
    parser.add_argument("--no-output", action="store_true", help="print, do not append")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    return bench_main(parse_args(argv), bench, render)


if __name__ == "__main__":
    sys.exit(main())
