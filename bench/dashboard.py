"""The operator's dashboard (issue 39): page load times with 100,000 runtime schedules
stored (goal: p95 at most 300 ms per page).

In one embedded PostgreSQL (migrated), `python -m schedules tenants import` of N schedules
(as bench/runtime_schedules.py makes them: 1,000 per tenant, 20 zones, every 50th paused),
then three completed runs of each schedule in the ledger (set-based). A Temporal dev
server holds the packaged catalog's jobs and the engine's, synced (no worker runs them),
so the list's catalog rows ask Temporal for their state as in production. The API
(`api.app.create_app`) serves that database on uvicorn in this process's thread, as
`python -m api serve` does; one operator session (the login form, as a browser does)
loads each page `--requests` times, one at a time, timed by the wall clock around the
whole HTTP request (the page rendered and read):

- the schedules list (first page: the catalog's jobs and 100 runtime schedules), filtered
  by tenant, by state paused, by source catalog, and the last page (keyset: `after` near
  the largest id);
- a runtime schedule's page (its next fire times, runs, change history), with `explain`
  of a slot; a catalog job's page, with `explain` of a slot (Temporal asked);
- a backfill's preview of one day of a 5-minute schedule (288 slots and their ledger rows).

    .venv/bin/python bench/dashboard.py --size 100000 --requests 200
    .venv/bin/python bench/dashboard.py --size 1000 --requests 20 --no-output  # a smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import psycopg
import uvicorn
from runtime_schedules import bench_import  # bench/ is sys.path[0] when run as a script
from sync_schedules import (
    BenchError,
    bench_main,
    dev_server,
    positive,
    provenance,
    say,
    scratch_dir,
)

from api import keys
from api.app import create_app
from api.settings import ApiSettings
from devstack import EmbeddedPostgres, free_port
from schedules import apply_sync, load_catalog

HERE = Path(__file__).resolve().parent
GOAL_MS = 300.0
QUEUE = "bench-dashboard"  # the catalog's schedules start their runs here; no worker polls
SEED_RUNS = """
INSERT INTO job_executions
    (job_name, scheduled_at, status, origin, attempt, started_at, finished_at)
SELECT 'rt-' || s.id, now() - k * interval '1 hour', 'completed', 'scheduled', 1,
       now() - k * interval '1 hour', now() - k * interval '1 hour' + interval '1 second'
FROM runtime_schedules s CROSS JOIN generate_series(1, 3) AS k
"""


@dataclass
class Result:
    size: int = 0
    requests: int = 0
    pages: dict[str, list[float]] = field(default_factory=dict)
    cpu: dict[str, list[float]] = field(default_factory=dict)  # this process's CPU seconds


def pages(conn: psycopg.Connection) -> dict[str, str]:
    """The pages timed, by what they show."""
    first, last, tenant = conn.execute(
        "SELECT min(id), max(id), min(tenant) FROM runtime_schedules"
    ).fetchone()
    five = conn.execute(
        "SELECT id, timezone FROM runtime_schedules WHERE cron = '*/5 * * * *' LIMIT 1"
    ).fetchone()
    if five is None:
        raise BenchError("no */5 schedule to backfill")
    day = (datetime.now(UTC) - timedelta(days=2)).date()
    job = load_catalog(engine=False)[0].id
    return {
        "schedules, first page": "/ui/schedules",
        "schedules, one tenant": f"/ui/schedules?tenant={tenant}",
        "schedules, state paused": "/ui/schedules?state=paused",
        "schedules, catalog jobs": "/ui/schedules?source=catalog",
        "schedules, last page": f"/ui/schedules?after={last - 50}",
        "a schedule, explain a slot": f"/ui/schedules/{first}?slot={day}T00:00",
        "a catalog job, explain a slot": f"/ui/jobs/{job}?slot={day}T09:00",
        "backfill preview, 288 slots": (
            f"/ui/schedules/{five[0]}/backfill?start={day}&end={day + timedelta(days=1)}"
        ),
    }


def serve(url: str, temporal: str) -> tuple[uvicorn.Server, threading.Thread, str]:
    port = free_port()
    settings = ApiSettings(database_url=url, temporal_address=temporal, temporal_task_queue=QUEUE)
    app = create_app(settings)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise BenchError("the API did not start")
        time.sleep(0.05)
    return server, thread, f"http://127.0.0.1:{port}"


def time_pages(
    base: str, key: str, paths: dict[str, str], requests: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Each page's wall-clock times, and the CPU time this process (the server and the
    client) spent on each request: what the page costs, whatever else the machine runs."""
    timed: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    with httpx.Client(base_url=base, timeout=60) as web:
        web.get("/ui/login")
        answer = web.post("/ui/login", data={"key": key, "csrf": web.cookies["sj_login"]})
        if answer.status_code != 303:
            raise BenchError(f"login: {answer.status_code}")
        for label, path in paths.items():
            web.get(path)  # warm: the templates compiled, the pool's connection opened
            times, spent = [], []
            for _ in range(requests):
                started, used = time.perf_counter(), time.process_time()
                answer = web.get(path)
                times.append(time.perf_counter() - started)
                spent.append(time.process_time() - used)
                if answer.status_code != 200:
                    raise BenchError(f"{path}: {answer.status_code} {answer.text[:300]}")
            timed[label], cpu[label] = times, spent
            say(f"  {label}: p95 {_ms(times, 0.95):.0f} ms (CPU p50 {_ms(spent, 0.5):.0f} ms)")
    return timed, cpu


async def bench(args: argparse.Namespace) -> Result:
    result = Result(size=args.size, requests=args.requests)
    with scratch_dir("bench-dashboard-", "PostgreSQL's data") as workdir:
        pg = EmbeddedPostgres(workdir / "pg", free_port())
        pg.start()
        try:
            _, url = bench_import(pg, args.size, workdir)
            with psycopg.connect(url) as conn:
                conn.execute(SEED_RUNS)
                conn.execute("ANALYZE")
                paths = pages(conn)
            _, key = await keys.create(url, tenant=None, by="bench")
            async with dev_server(workdir / "temporal.log") as (client, _):
                await apply_sync(client, load_catalog(), QUEUE, prune=False)
                server, thread, base = serve(url, client.service_client.config.target_host)
                try:
                    result.pages, result.cpu = await asyncio.to_thread(
                        time_pages, base, key, paths, args.requests
                    )
                finally:
                    server.should_exit = True
                    thread.join(timeout=30)
        finally:
            pg.stop("immediate")
    return result


def _ms(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1] * 1000


def render(result: Result, machine: dict[str, str], when: datetime, load) -> str:
    rows = "\n".join(
        f"| {label} | {_ms(t, 0.5):.0f} | {_ms(t, 0.95):.0f} | {max(t) * 1000:.0f} | "
        f"{_ms(result.cpu[label], 0.5):.0f} | {_ms(result.cpu[label], 0.95):.0f} | "
        f"{'yes' if _ms(t, 0.95) <= GOAL_MS else '**no**'} |"
        for label, t in result.pages.items()
    )
    return f"""
## Dashboard page loads, {result.size:,} runtime schedules stored ({when:%Y-%m-%d %H:%M} UTC)

{provenance(machine, load)}

Each page loaded {result.requests} times, one at a time, by one operator session
(milliseconds, the whole HTTP request; the server in the benchmark's process; CPU: the
time this process spent on the CPU during the request, the server's and the client's
work, which the machine's other load does not lengthen as it does the wall clock):

| page | p50 | p95 | max | CPU p50 | CPU p95 | p95 ≤ {GOAL_MS:.0f} ms |
|---|---|---|---|---|---|---|
{rows}
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=positive, default=100_000)
    parser.add_argument("--requests", type=positive, default=200, help="per page")
    parser.add_argument("--output", type=Path, default=HERE / "results" / "2026-12-08-dashboard.md")
    parser.add_argument("--no-output", action="store_true", help="print, do not append")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    return bench_main(parse_args(argv), bench, render)


if __name__ == "__main__":
    sys.exit(main())
