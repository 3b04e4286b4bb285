"""The HTTP API against the library call under it (issue 38): create, update and pause
p50 / p99 with 100,000 runtime schedules stored, both measured in the same run.

In one embedded PostgreSQL (migrated with `worker.migrate.apply_migrations`):

1. `--stored` schedules (default 100,000; 1,000 per tenant, as bench/runtime_schedules.py
   makes them) are imported through `schedules.tenants.import_lines`;
2. `python -m api serve` runs in its own process (as deployed: uvicorn, the pool of
   `DATABASE_POOL_SIZE`, the access log, per-key rate limits raised out of the way), and
   one key per tenant the bench writes to is created;
3. `--calls` calls of each kind, one at a time, the library's and the API's alternating
   call by call (so the machine's load, shared with others, falls on both alike):
   - library: `schedules.tenants.create` / `update` / `pause` over one connection the
     caller holds, as bench/runtime_schedules.py measures them;
   - API: `POST /v1/schedules`, `PATCH /v1/schedules/{id}` with `If-Match`,
     `POST /v1/schedules/{id}/pause`, from one keep-alive HTTP client (httpx), the
     client's time from sending the request to having read and parsed the answer.

Goal (issue 38): each API p99 at most 2x the library's p99 of the same call.

Not `bench/api.py`: run as a script, bench/ comes first on sys.path, and a bench/api.py
would hide the `api` package from every script here.

    .venv/bin/python bench/api_latency.py --output bench/results/2026-12-07-api.md
    .venv/bin/python bench/api_latency.py --stored 2000 --calls 100 --no-output  # smoke
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
import psycopg
from runtime_schedules import PER_TENANT, line  # bench/ is sys.path[0] when run as a script
from sync_schedules import BenchError, bench_main, positive, provenance, say, scratch_dir

from api import keys
from devstack import EmbeddedPostgres, free_port
from schedules import tenants
from schedules.tenants import Quotas
from worker.migrate import apply_migrations

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GOAL_RATIO = 2.0
CALLS = ("create", "update", "pause")


@dataclass
class Result:
    stored: int = 0
    import_seconds: float = 0.0
    library: dict[str, list[float]] = field(default_factory=dict)
    api: dict[str, list[float]] = field(default_factory=dict)
    pool_size: str = ""


def serve(url: str, port: int, log: Path) -> subprocess.Popen:
    """`python -m api serve` on 127.0.0.1:`port` over `url`, its output in `log`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "API_"))}
    env |= {
        "DATABASE_URL": url,
        "API_PORT": str(port),
        # The bench measures latency, not the limiter: no key is held back.
        "API_RATE_PER_SECOND": "100000",
        "API_RATE_BURST": "1000000",
    }
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "api", "serve"], cwd=ROOT, env=env, stdout=out, stderr=out
        )


async def wait_ready(http: httpx.AsyncClient, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            raise BenchError(f"the API exited {proc.returncode}: {log.read_text()[-500:]}")
        try:
            if (await http.get("/readyz")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise BenchError("the API was not ready in 60 s")
        await asyncio.sleep(0.2)


def expect(answer: httpx.Response, status: int) -> dict:
    if answer.status_code != status:
        raise BenchError(f"{answer.request.method} {answer.request.url}: {answer.text[:300]}")
    return answer.json()


async def measure(url: str, http: httpx.AsyncClient, calls: int, result: Result) -> None:
    quotas = Quotas()
    lib = {name: [] for name in CALLS}
    api = {name: [] for name in CALLS}
    tenants_written = {f"api-{i // PER_TENANT}" for i in range(calls)}
    bearer = {
        tenant: {"Authorization": f"Bearer {(await keys.create(url, tenant=tenant))[1]}"}
        for tenant in sorted(tenants_written)
    }
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        lib_ids: list[tuple[int, int]] = []
        api_ids: list[tuple[int, int, dict[str, str]]] = []
        for i in range(calls):
            started = time.perf_counter()
            made = await tenants.create(
                conn, line(i, "lib") | {"paused": False}, by="bench", quotas=quotas
            )
            lib["create"].append(time.perf_counter() - started)
            lib_ids.append((made.schedule.id, made.schedule.version))

            data = line(i, "api") | {"paused": False}
            headers = bearer[data["tenant"]]
            started = time.perf_counter()
            body = expect(await http.post("/v1/schedules", json=data, headers=headers), 201)
            api["create"].append(time.perf_counter() - started)
            api_ids.append((body["id"], body["version"], headers))

        for i, ((lib_id, lib_version), (api_id, api_version, headers)) in enumerate(
            zip(lib_ids, api_ids, strict=True)
        ):
            change = {"cron": f"{(i + 7) % 60} 9 * * 1"}
            started = time.perf_counter()
            await tenants.update(conn, lib_id, lib_version, change, by="bench", quotas=quotas)
            lib["update"].append(time.perf_counter() - started)

            started = time.perf_counter()
            answer = await http.patch(
                f"/v1/schedules/{api_id}",
                json=change,
                headers=headers | {"If-Match": f'"{api_version}"'},
            )
            expect(answer, 200)
            api["update"].append(time.perf_counter() - started)

        for (lib_id, _), (api_id, _, headers) in zip(lib_ids, api_ids, strict=True):
            started = time.perf_counter()
            await tenants.pause(conn, lib_id, "bench: paused", by="bench")
            lib["pause"].append(time.perf_counter() - started)

            started = time.perf_counter()
            note = {"note": "bench: paused"}
            answer = await http.post(f"/v1/schedules/{api_id}/pause", json=note, headers=headers)
            expect(answer, 200)
            api["pause"].append(time.perf_counter() - started)
    result.library, result.api = lib, api


async def bench(args: argparse.Namespace) -> Result:
    result = Result(pool_size=os.environ.get("DATABASE_POOL_SIZE", "the default"))
    with scratch_dir("bench-api-", "PostgreSQL's data and the API's log") as workdir:
        pg = EmbeddedPostgres(workdir / "pg", free_port())
        pg.start()
        proc = None
        try:
            url = pg.create_database("api_bench")
            apply_migrations(url)
            say(f"importing {args.stored:,} schedules")
            started = time.perf_counter()
            lines = (json.dumps(line(i)) for i in range(args.stored))
            report = await tenants.import_lines(url, lines, by="bench")
            result.import_seconds = time.perf_counter() - started
            if report.created != args.stored:
                raise BenchError(f"imported {report.created} of {args.stored}")
            result.stored = args.stored
            port = free_port()
            proc = serve(url, port, workdir / "api.log")
            base = f"http://127.0.0.1:{port}"
            async with httpx.AsyncClient(base_url=base, timeout=30) as http:
                await wait_ready(http, proc, workdir / "api.log")
                say(f"latency: {args.calls} calls of each kind, each way")
                await measure(url, http, args.calls, result)
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(30)
            pg.stop("immediate")
    return result


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)] * 1000


def render(result: Result, machine: dict[str, str], when: datetime, load) -> str:
    rows, verdicts = [], []
    for name in CALLS:
        lib, api = result.library[name], result.api[name]
        for who, values in (("library", lib), ("API", api)):
            rows.append(
                f"| {name} | {who} | {len(values):,} | {statistics.median(values) * 1000:.2f} "
                f"| {_ms(values, 0.99):.2f} | {max(values) * 1000:.2f} |"
            )
        ratio = _ms(api, 0.99) / _ms(lib, 0.99)
        met = "met" if ratio <= GOAL_RATIO else "NOT met"
        verdicts.append(
            f"- {name}: API p99 / library p99 = {ratio:.2f}, goal {GOAL_RATIO:.0f}x: {met}"
        )
    table = "\n".join(rows)
    return f"""
## The HTTP API against the library, {result.stored:,} schedules stored ({when:%Y-%m-%d %H:%M} UTC)

{provenance(machine, load)}
- load average (1, 5, 15 min) at the end: {", ".join(f"{x:.2f}" for x in os.getloadavg())}

{result.stored:,} runtime schedules imported first ({result.import_seconds:.1f} s). Then one
call at a time, the library's and the API's alternating; the library over one connection
it holds, the API (`python -m api serve` in its own process, pool size {result.pool_size})
from one keep-alive httpx client on the same machine, timed by the client:

| call | through | calls | p50 ms | p99 ms | max ms |
| --- | --- | --- | --- | --- | --- |
{table}

{chr(10).join(verdicts)}
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stored", type=positive, default=100_000, help="schedules stored")
    parser.add_argument("--calls", type=positive, default=2000, help="per kind, each way")
    today = datetime.now(UTC).date()
    parser.add_argument("--output", type=Path, default=HERE / "results" / f"{today}-api.md")
    parser.add_argument("--no-output", action="store_true", help="print, do not write")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    return bench_main(parse_args(argv), bench, render)


if __name__ == "__main__":
    sys.exit(main())
