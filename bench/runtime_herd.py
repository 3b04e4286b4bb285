"""The herd: thousands of runtime schedules due in the same minute (issue 21, acceptance).

On a stack of its own (a Temporal dev server with a state file, PostgreSQL, two worker
processes of role jobs and one of role dispatch, the catalog's four dispatcher jobs synced
onto the dispatch task queue and ticking every minute):

1. **Batch mode**: `--herd` (15,000) test-noop schedules, all due at the same minute M
   (cron `<minute> <hour> * * *`, bounded by end_at: one slot each). Measured from M: when
   the last slot's intent was started, and when the last slot was claimed (its ledger row).
2. **Per-slot mode**: `--per-slot` (1,000) weekly-report schedules due seven minutes after:
   the dispatcher's start rate (from the server's start times of the runs), against raw
   `start_workflow` from this process measured in the same run just before, with the same
   concurrency (64) and measured the same way: of a workflow type no worker serves, the
   fleet idle; and of the herd's own workflow (RuntimeRunWorkflow, `--raw` weekly reports
   of other schedules), which the fleet runs as they start, as it runs the dispatcher's.
3. **Idle tick**: a tick of each shard with nothing due, with 1,000 / 10,000 / 100,000
   schedules stored: its SQL statements and milliseconds; the number of Temporal schedules.
4. `schedules audit --settle 0s` over the two minutes: it must find nothing.

    .venv/bin/python bench/runtime_herd.py              # --herd 15000 --per-slot 1000
    .venv/bin/python bench/runtime_herd.py --write      # and append to bench/results/<UTC date>.md
    .venv/bin/python bench/runtime_herd.py --herd-only  # the batch herd and its audit only

Never a timed test: a figure of the machine it ran on.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from psycopg_pool import AsyncConnectionPool
from temporalio.common import SearchAttributePair, TypedSearchAttributes

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from chaos import Stack  # noqa: E402
from results_file import append, today  # noqa: E402

from activities.runtime.dispatch import Dispatcher  # noqa: E402
from activities.runtime.models import (  # noqa: E402
    KIND_ATTRIBUTE,
    SCHEDULE_ATTRIBUTE,
    TENANT_ATTRIBUTE,
    RuntimeRun,
    slot_workflow_id,
)
from jobs.runtime_dispatch.activities import batch_kinds  # noqa: E402
from schedules.catalog.model import load_catalog  # noqa: E402
from schedules.sync.apply import sync  # noqa: E402
from schedules.sync.attributes import runtime_attributes  # noqa: E402
from tests.helpers.worker import WorkerProcess  # noqa: E402

SHARDS = 4
IDLE_SIZES = (1_000, 10_000, 100_000)


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def insert(db: psycopg.Connection, n: int, kind: str, minute: datetime, tenant: str) -> None:
    """`n` schedules of `kind` firing once, at `minute` (UTC cron, end_at there), in one
    set-based statement, as the API stores them (bucket id % 16, next_fire_at, timing_since)."""
    db.execute(
        """
        WITH ids AS (SELECT nextval('runtime_schedules_id_seq') AS id, n
                     FROM generate_series(1, %(n)s) AS n)
        INSERT INTO runtime_schedules
            (id, tenant, name, kind, cron, timezone, params, catchup, shard, next_fire_at,
             timing_since, end_at)
        SELECT ids.id, %(tenant)s || '-' || n, 'herd', %(kind)s, %(cron)s, 'UTC',
               CASE WHEN c.id IS NULL THEN '{}' ELSE jsonb_build_object('customer_id', c.id)
               END,
               'latest', ids.id %% 16, %(minute)s, %(since)s, %(minute)s
        FROM ids
        LEFT JOIN customers c ON %(kind)s = 'weekly-report' AND c.tenant = %(tenant)s || '-' || n
        """,
        {
            "n": n,
            "kind": kind,
            "tenant": tenant,
            "cron": f"{minute.minute} {minute.hour} * * *",
            "minute": minute,
            "since": minute - timedelta(minutes=30),
        },
    )


def customers(db: psycopg.Connection, n: int, tenant: str) -> None:
    db.execute(
        "INSERT INTO customers (tenant, name, email, timezone)"
        " SELECT %s || '-' || n, 'Customer ' || n, 'c' || n || '@example.com', 'UTC'"
        " FROM generate_series(1, %s) AS n",
        (tenant, n),
    )


def wait_until(instant: datetime) -> None:
    while datetime.now(UTC) < instant:
        time.sleep(0.05)


async def wait_for(check, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(0.5)


def herd_figures(db: psycopg.Connection, kind: str, minute: datetime) -> dict:
    """From the record: slots, intents started, the last start and claim after `minute`."""
    row = db.execute(
        """
        SELECT count(*), count(i.started_at),
               extract(epoch FROM max(i.started_at) - %(m)s),
               extract(epoch FROM max(i.started_at) - min(i.started_at)),
               (SELECT count(*) FROM job_executions e JOIN runtime_schedules s2
                  ON e.job_name = 'rt-' || s2.id
                WHERE s2.kind = %(kind)s AND e.scheduled_at = %(m)s),
               (SELECT extract(epoch FROM max(e.started_at) - %(m)s) FROM job_executions e
                JOIN runtime_schedules s2 ON e.job_name = 'rt-' || s2.id
                WHERE s2.kind = %(kind)s AND e.scheduled_at = %(m)s)
        FROM runtime_dispatch_intents i JOIN runtime_schedules s ON s.id = i.schedule_id
        WHERE s.kind = %(kind)s AND i.scheduled_at = %(m)s
        """,
        {"m": minute, "kind": kind},
    ).fetchone()
    slots, started, last_start, spread, claimed, last_claim = row
    return {
        "slots": slots,
        "started": started,
        "last_start_s": float(last_start or 0),
        "start_spread_s": float(spread or 0),
        "claimed": claimed,
        "last_claim_s": float(last_claim or 0),
    }


async def started_rate(client, query: str) -> float:
    """Workflows started per second, from the server's own start times of the runs the
    query lists: the count over the span from the first start to the last."""
    starts = [ex.start_time async for ex in client.list_workflows(query, page_size=1000)]
    span = (max(starts) - min(starts)).total_seconds() if len(starts) > 1 else 0.0
    return (len(starts) - 1) / span if span else 0.0


async def raw_run_start_rate(
    client, db: psycopg.Connection, task_queue: str, n: int, concurrency: int = 64
) -> float:
    """Workflows started per second by `start_workflow` alone, of the per-slot herd's own
    workflow (RuntimeRunWorkflow, a weekly report each, the same search attributes),
    which the fleet runs as they start: raw starts under the load the dispatcher's starts
    meet, so the ratio is the dispatcher's own cost. Its `n` one-slot schedules (tenants
    `r-*`, their slot the last whole minute) are never due to the dispatcher
    (next_fire_at NULL); the audit judges their runs like any."""
    slot = datetime.now(UTC).replace(second=0, microsecond=0)
    customers(db, n, "r")
    insert(db, n, "weekly-report", slot, "r")
    db.execute("UPDATE runtime_schedules SET next_fire_at = NULL WHERE tenant LIKE 'r-%%'")
    rows = db.execute(
        "SELECT id, tenant FROM runtime_schedules WHERE tenant LIKE 'r-%%'"
    ).fetchall()
    gate = asyncio.Semaphore(concurrency)

    async def one(sid: int, tenant: str) -> None:
        attributes = TypedSearchAttributes(
            [
                SearchAttributePair(TENANT_ATTRIBUTE, tenant),
                SearchAttributePair(SCHEDULE_ATTRIBUTE, "herd"),
                SearchAttributePair(KIND_ATTRIBUTE, "weekly-report"),
            ]
        )
        async with gate:
            await client.start_workflow(
                "RuntimeRunWorkflow",
                RuntimeRun(schedule_id=sid, scheduled_at=slot),
                id=slot_workflow_id(sid, slot),
                task_queue=task_queue,
                search_attributes=attributes,
            )

    began = datetime.now(UTC)
    await asyncio.gather(*(one(sid, tenant) for sid, tenant in rows))
    return await started_rate(
        client,
        f"WorkflowType = 'RuntimeRunWorkflow' AND TaskQueue = '{task_queue}' "
        f"AND StartTime >= '{began:%Y-%m-%dT%H:%M:%S.%fZ}'",
    )


async def raw_start_rate(client, n: int, concurrency: int = 64) -> float:
    """Workflows started per second by `start_workflow` alone (a type no worker serves),
    measured as the dispatcher's is: from the server's start times."""
    gate = asyncio.Semaphore(concurrency)
    queue = f"raw-{uuid.uuid4().hex[:8]}"

    async def one(i: int) -> None:
        async with gate:
            await client.start_workflow("RawStartBench", id=f"raw-{queue}-{i}", task_queue=queue)

    await asyncio.gather(*(one(i) for i in range(n)))
    return await started_rate(client, f"TaskQueue = '{queue}'")


async def idle_tick(url: str, client, stored: int) -> dict:
    """An idle tick of every shard (nothing due) with `stored` schedules in the table."""
    with psycopg.connect(url, autocommit=True) as db:
        have = db.execute("SELECT count(*) FROM runtime_schedules").fetchone()[0]
        if have < stored:
            later = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(days=1)
            insert(db, stored - have, "test-noop", later, f"idle{stored}")
        db.execute("ANALYZE runtime_schedules")
    async with AsyncConnectionPool(url, min_size=1, max_size=2) as pool:
        d = Dispatcher(pool, client, "idle-bench", batch_kinds())
        now = datetime.now(UTC)
        await d.tick(0, now)  # warm the pool and the plans
        statements, began = 0, time.perf_counter()
        for shard in range(SHARDS):
            statements += (await d.tick(shard, now)).statements
        ms = (time.perf_counter() - began) * 1000 / SHARDS
    return {"stored": stored, "statements": statements // SHARDS, "ms": ms}


async def run(args: argparse.Namespace) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="herd-"))
    stack = Stack(workdir)
    workers: list[WorkerProcess] = []
    results: dict = {}
    try:
        await stack.start()
        client = stack.client
        url = stack.database()
        db = psycopg.connect(url, autocommit=True)
        task_queue = "herd"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "DATABASE_"))}
        env |= {
            "TEMPORAL_ADDRESS": stack.temporal.address,
            "TEMPORAL_TASK_QUEUE": task_queue,
            "DATABASE_URL": url,
            "PYTHONUNBUFFERED": "1",
        }
        await runtime_attributes(client, register=True)
        # The fleet's workers run the slots; workers of their own run only the ticks, on
        # the dispatch task queue (WORKER_ROLE: docs/deploy.md).
        for i in range(args.workers):
            workers.append(
                WorkerProcess(env | {"WORKER_ROLE": "jobs"}, workdir / f"worker-{i}.log")
            )
        for i in range(args.dispatchers):
            log = workdir / f"dispatcher-{i}.log"
            workers.append(WorkerProcess(env | {"WORKER_ROLE": "dispatch"}, log))
        for w in workers:
            await asyncio.to_thread(w.wait_ready, 90)
        # The dispatch shards in force from the start (`--shards`; activities/runtime/shards.py).
        db.execute("UPDATE runtime_dispatch_shards SET shards = %s", (args.shards,))
        catalog = load_catalog(shards=args.shards)
        dispatchers = [job for job in catalog if job.kind == "runtime-dispatch"]
        await sync(client, dispatchers, task_queue, prune=False)
        now = datetime.now(UTC)
        batch_minute = now.replace(second=0, microsecond=0) + timedelta(minutes=2)
        per_slot_minute = batch_minute + timedelta(minutes=7)
        insert(db, args.herd, "test-noop", batch_minute, "b")
        if not args.herd_only:
            customers(db, args.per_slot, "p")
            insert(db, args.per_slot, "weekly-report", per_slot_minute, "p")
        db.execute("ANALYZE")
        say(f"herd of {args.herd} batch slots at {batch_minute:%H:%M}Z, "
            f"{args.per_slot} per-slot at {per_slot_minute:%H:%M}Z")  # fmt: skip
        await asyncio.to_thread(wait_until, batch_minute)

        await wait_for(claimed(db, "test-noop", batch_minute, args.herd), 600, "batch herd claimed")
        results["batch"] = herd_figures(db, "test-noop", batch_minute)
        say(f"batch: {results['batch']}")
        if not args.herd_only:
            results |= await per_slot_phase(client, db, task_queue, per_slot_minute, args)
        await wait_for(lambda: running(db) == 0, 900, "every runtime slot settled")
        last = batch_minute if args.herd_only else per_slot_minute
        audit = subprocess.run(
            [sys.executable, "-m", "schedules", "audit", "--settle", "0s",
             "--from", f"{batch_minute:%Y-%m-%dT%H:%M:%SZ}",
             "--to", f"{last + timedelta(minutes=1):%Y-%m-%dT%H:%M:%SZ}"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
        results["audit"] = (audit.returncode, audit.stdout.strip().splitlines()[-1:])
        say(f"audit: exit {audit.returncode} {audit.stdout[-500:]} {audit.stderr[-300:]}")
        for w in workers:
            w.stop()
        workers = []
        if not args.herd_only:
            idle_url = stack.database()
            results["idle"] = [await idle_tick(idle_url, client, n) for n in IDLE_SIZES]
        listed = [s async for s in await client.list_schedules()]
        results["temporal_schedules"] = len(listed)
        say(f"idle: {results.get('idle')}; Temporal schedules: {len(listed)}")
        db.close()
    finally:
        for w in workers:
            w.stop()
        stack.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return results


def claimed(db: psycopg.Connection, kind: str, minute: datetime, n: int):
    return lambda: herd_figures(db, kind, minute)["claimed"] >= n


def running(db: psycopg.Connection) -> int:
    return db.execute(
        "SELECT count(*) FROM job_executions WHERE job_name ~ '^rt-' AND status = 'running'"
    ).fetchone()[0]


async def per_slot_phase(
    client, db: psycopg.Connection, task_queue: str, minute: datetime, args: argparse.Namespace
) -> dict:
    """Raw starts while the fleet is idle (the batch herd is done), then the per-slot herd
    at `minute`: the dispatcher's start rate, the last start and claim."""
    results: dict = {"raw_start_rate": await raw_start_rate(client, args.raw)}
    say(f"raw start_workflow: {results['raw_start_rate']:.0f}/s")
    results["raw_run_start_rate"] = await raw_run_start_rate(client, db, task_queue, args.raw)
    say(f"raw start_workflow of RuntimeRunWorkflow: {results['raw_run_start_rate']:.0f}/s")
    await wait_for(lambda: running(db) == 0, 900, "the raw runs settled")
    await asyncio.to_thread(wait_until, minute)
    await wait_for(
        lambda: herd_figures(db, "weekly-report", minute)["started"] >= args.per_slot,
        900,
        "per-slot herd started",
    )
    per_slot = herd_figures(db, "weekly-report", minute)
    per_slot["start_rate"] = await started_rate(
        client,
        f"WorkflowType = 'RuntimeRunWorkflow' AND TaskQueue = '{task_queue}' "
        f"AND StartTime >= '{minute:%Y-%m-%dT%H:%M:%SZ}'",
    )
    await wait_for(claimed(db, "weekly-report", minute, args.per_slot), 1800, "per-slot claimed")
    figures = herd_figures(db, "weekly-report", minute)
    per_slot |= {k: figures[k] for k in ("claimed", "last_claim_s")}
    say(f"per-slot: {per_slot}")
    return results | {"per_slot": per_slot}


def render(results: dict, args: argparse.Namespace) -> str:
    b, p = results["batch"], results["per_slot"]
    raw, raw_runs = results["raw_start_rate"], results["raw_run_start_rate"]
    idle = results["idle"]
    code, last = results["audit"]
    return (
        "\n".join(
            [
                f"### Runtime schedules: the herd ({datetime.now(UTC):%Y-%m-%d})",
                "",
                f"Command: `.venv/bin/python bench/runtime_herd.py --herd {args.herd} --per-slot "
                f"{args.per_slot}`; machine: {os.cpu_count()} cores (shared), {args.workers} "
                f"worker processes (role jobs) and {args.dispatchers} dispatcher (role "
                f"dispatch), the dev server and PostgreSQL on the same host; load average "
                f"{os.getloadavg()[0]:.1f} at the end.",
                "",
                "| measure | figure | target |",
                "| --- | --- | --- |",
                f"| batch herd: {b['slots']} slots due at one minute, last intent started | "
                f"{b['last_start_s']:.1f} s after the minute | 60 s |",
                f"| batch herd: last slot claimed (its ledger row) | {b['last_claim_s']:.1f} s "
                f"after the minute | 30 s |",
                f"| per-slot herd: {p['slots']} slots, dispatcher's start rate | "
                f"{p['start_rate']:.0f} workflows/s (last started {p['last_start_s']:.1f} s, last "
                f"claimed {p['last_claim_s']:.1f} s after the minute) | >= 0.9 x raw |",
                f"| raw `start_workflow`, same server, concurrency 64, the fleet idle | {raw:.0f} workflows/s "
                f"(ratio {p['start_rate'] / raw:.2f}) | |",
                f"| raw `start_workflow` of the same workflow (RuntimeRunWorkflow, weekly reports the "
                f"fleet runs as they start), concurrency 64 | {raw_runs:.0f} workflows/s (ratio "
                f"{p['start_rate'] / raw_runs:.2f}) | per-slot >= 0.9 x raw |",
                *(
                    f"| idle tick, {i['stored']:,} schedules stored | {i['statements']} statements, "
                    f"{i['ms']:.1f} ms per shard | |"
                    for i in idle
                ),
                f"| Temporal schedules in the namespace | {results['temporal_schedules']} "
                f"(the dispatchers), whatever the number stored | constant |",
                f"| `schedules audit --settle 0s` over the two minutes | exit {code}: "
                f"{' '.join(last).split(';')[0]} | exit 0 |",
            ]
        )
        + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--herd", type=int, default=15_000)
    parser.add_argument("--per-slot", type=int, default=1_000)
    parser.add_argument("--raw", type=int, default=1_000, help="raw starts to compare with")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (role jobs)")
    parser.add_argument(
        "--dispatchers", type=int, default=1, help="worker processes of role dispatch"
    )
    parser.add_argument("--shards", type=int, default=4, choices=(1, 2, 4, 8, 16))
    parser.add_argument("--write", action="store_true", help="append to bench/results/<date>.md")
    parser.add_argument(
        "--herd-only",
        action="store_true",
        help="the batch herd and its audit only (no per-slot herd, raw starts, idle ticks)",
    )
    args = parser.parse_args(argv)
    results = asyncio.run(run(args))
    if args.herd_only:
        print(results)
        return 0 if results["audit"][0] == 0 else 1
    table = render(results, args)
    print(table)
    if args.write:
        append(today(), "\n" + table)
    return 0 if results["audit"][0] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
