"""The noisy neighbour: one tenant's thousands of slow slots beside many small tenants
(issue 40, item 6 and its acceptance).

On a stack of its own (a Temporal dev server, PostgreSQL, `--workers` worker processes of
role jobs, one of role dispatch, the engine's dispatchers synced and ticking every minute):

- `--small` (1,000) tenants with one every-minute schedule each, of no work (`test-noop`,
  which runs in batches; `--small-kind test-sleep`: a run each), firing for `--minutes`
  (10) from minute M;
- one tenant, `big`, with `--big` (5,000) every-minute `test-sleep` schedules whose work
  takes `--work` (20 s), firing from M + minutes/2 (the second half), held by its own
  limit of `--limit` (100) runs in flight (`runtime_tenant_limits`).

Measured from the record, in the same run: the small tenants' start delay (the ledger's
`started_at`, when the run claimed its slot, minus the slot's time), p50/p99/max, in the
first half (the fleet without the big tenant) and in the second (with it); the big tenant's
runs in flight each second of the second half (never above its limit) and its slots run,
deferred and skipped; each dispatcher tick's phases (`activities.runtime.tick_counts`: how late it
began, its decide and start milliseconds) and the small tenants' batch runs' steps from
slot to claim (their Temporal histories), alone and with the big tenant; then
`schedules audit --settle 0s` over the whole window.

    .venv/bin/python bench/noisy_neighbour.py            # --big 5000 --small 1000 ...

`--server-fairness` turns the dev server's task-queue fairness on (`matching.enableFairness`,
off by default in Temporal 1.32): the job workers' queue is then balanced by the runs'
fairness keys (their tenants), not first come, first served.

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
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from psycopg.types.json import Jsonb
from temporalio.api.enums.v1 import EventType

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from chaos import Stack  # noqa: E402

from schedules.catalog.model import load_catalog  # noqa: E402
from schedules.sync.apply import sync  # noqa: E402
from schedules.sync.attributes import runtime_attributes  # noqa: E402
from tests.helpers.worker import WorkerProcess  # noqa: E402


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def insert(
    db: psycopg.Connection, n: int, tenants: str, kind: str, params: dict, first: datetime,
    last: datetime,
) -> None:  # fmt: skip
    """`n` every-minute schedules of `kind` firing from `first` to `last` (end_at), in one
    set-based statement, as the API stores them. `tenants`: one tenant each
    (`<tenants>-<n>`), or one for all (`big`)."""
    db.execute(
        """
        WITH ids AS (SELECT nextval('runtime_schedules_id_seq') AS id, n
                     FROM generate_series(1, %(n)s) AS n)
        INSERT INTO runtime_schedules
            (id, tenant, name, kind, cron, timezone, params, catchup, shard, next_fire_at,
             timing_since, end_at)
        SELECT id, CASE WHEN %(one)s THEN %(tenants)s ELSE %(tenants)s || '-' || n END,
               's' || n, %(kind)s, '* * * * *', 'UTC', %(params)s, 'latest', id %% 16,
               %(first)s, %(first)s, %(last)s
        FROM ids
        """,
        {"n": n, "tenants": tenants, "one": tenants == "big", "kind": kind,
         "params": Jsonb(params), "first": first, "last": last},
    )  # fmt: skip


def wait_until(instant: datetime) -> None:
    while datetime.now(UTC) < instant:
        time.sleep(0.5)


def delays(db: psycopg.Connection, first: datetime, last: datetime) -> dict:
    """The small tenants' start delays (claim minus slot) of the slots in [first, last)."""
    row = db.execute(
        """
        SELECT count(*),
               percentile_cont(0.5) WITHIN GROUP (ORDER BY d),
               percentile_cont(0.99) WITHIN GROUP (ORDER BY d), max(d)
        FROM (SELECT extract(epoch FROM e.started_at - e.scheduled_at) AS d
              FROM job_executions e JOIN runtime_schedules s ON e.job_name = 'rt-' || s.id
              WHERE s.tenant LIKE 'small-%%' AND e.status = 'completed'
                AND e.scheduled_at >= %(first)s AND e.scheduled_at < %(last)s) t
        """,
        {"first": first, "last": last},
    ).fetchone()
    return {"slots": row[0], "p50_s": float(row[1] or 0), "p99_s": float(row[2] or 0),
            "max_s": float(row[3] or 0)}  # fmt: skip


def big_figures(db: psycopg.Connection, first: datetime, last: datetime) -> dict:
    """The big tenant's slots by status, and its runs in flight each second (a ledger row
    from its claim to its finish) from `first` to `last`."""
    by_status = dict(
        db.execute(
            "SELECT e.status, count(*) FROM job_executions e JOIN runtime_schedules s"
            " ON e.job_name = 'rt-' || s.id WHERE s.tenant = 'big' GROUP BY 1"
        ).fetchall()
    )
    in_flight = db.execute(
        """
        SELECT max(n), percentile_cont(0.5) WITHIN GROUP (ORDER BY n)
        FROM (SELECT t, (SELECT count(*) FROM job_executions e
                         JOIN runtime_schedules s ON e.job_name = 'rt-' || s.id
                         WHERE s.tenant = 'big' AND e.started_at <= t
                           AND coalesce(e.finished_at, 'infinity') > t) AS n
              FROM generate_series(%(first)s::timestamptz, %(last)s, '1 second') AS t) x
        """,
        {"first": first, "last": last},
    ).fetchone()
    return {"status": by_status, "in_flight_max": in_flight[0],
            "in_flight_median": float(in_flight[1] or 0)}  # fmt: skip


PHASES = ("tick_ms", "due_ms", "limits_ms", "record_ms", "defer_ms", "decide_ms",
          "unstarted_ms", "batch_start_ms", "slot_start_ms", "gate_wait_ms",
          "batches_started_ms", "started", "deferred", "due", "rounds")  # fmt: skip


def ticks(db: psycopg.Connection, first: datetime, last: datetime) -> dict:
    """The dispatchers' ticks of the minutes in [first, last), from their ledger rows: how
    late each began (claim minus its minute), and the medians and maxima of its phases'
    milliseconds and its counts (`activities.runtime.tick_counts`)."""
    rows = db.execute(
        """
        SELECT job_name, scheduled_at, extract(epoch FROM started_at - scheduled_at),
               extract(epoch FROM finished_at - scheduled_at), result -> 'counts'
        FROM job_executions
        WHERE job_name LIKE 'runtime-dispatch-%%' AND status = 'completed'
          AND scheduled_at >= %(first)s AND scheduled_at < %(last)s
        ORDER BY scheduled_at, job_name
        """,
        {"first": first, "last": last},
    ).fetchall()
    for name, minute, began, ended, counts in rows:
        phases = " ".join(f"{k}={counts.get(k, 0)}" for k in PHASES if counts.get(k))
        say(f"  {minute:%H:%M} {name}: began +{began:.1f}s ended +{ended:.1f}s {phases}")

    summary = {"ticks": len(rows), "began_s": spread([float(r[2]) for r in rows]),
               "ended_s": spread([float(r[3]) for r in rows])}  # fmt: skip
    for phase in PHASES:
        summary[phase] = spread([float(r[4].get(phase, 0)) for r in rows])
    return summary


# Runs not done: a ledger row running, or an intent (decided, perhaps started) whose run
# has not claimed its slot yet.
UNSETTLED = """
SELECT (SELECT count(*) FROM job_executions WHERE job_name ~ '^rt-' AND status = 'running')
     + (SELECT count(*) FROM runtime_dispatch_intents i
        WHERE NOT EXISTS (SELECT 1 FROM job_executions e
                          WHERE e.job_name = 'rt-' || i.schedule_id
                            AND e.scheduled_at = i.scheduled_at))
"""
STEPS = ("started", "workflow_task", "activity_scheduled", "activity_started")


async def batch_timelines(client, db: psycopg.Connection, first: datetime, last: datetime) -> dict:
    """Where the small tenants' batch runs of the slots in [first, last) spent the time from
    their slot to their claim, from each run's Temporal history (seconds after the slot,
    median and max): its start, its first workflow task taken by a worker, its claim
    activity scheduled, and taken by a worker."""
    rows = db.execute(
        "SELECT DISTINCT workflow_id, scheduled_at FROM runtime_dispatch_intents"
        " WHERE workflow_id LIKE 'rt-batch-%%' AND scheduled_at >= %s AND scheduled_at < %s",
        (first, last),
    ).fetchall()
    found: dict[str, list[float]] = {step: [] for step in STEPS}
    wanted = {
        "WORKFLOW_EXECUTION_STARTED": "started",
        "WORKFLOW_TASK_STARTED": "workflow_task",
        "ACTIVITY_TASK_SCHEDULED": "activity_scheduled",
        "ACTIVITY_TASK_STARTED": "activity_started",
    }
    for workflow_id, slot in rows:
        seen: set[str] = set()
        history = await client.get_workflow_handle(workflow_id).fetch_history()
        for event in history.events:
            step = wanted.get(EventType.Name(event.event_type).removeprefix("EVENT_TYPE_"))
            if step is not None and step not in seen:
                seen.add(step)
                at = event.event_time.ToDatetime(tzinfo=UTC)
                found[step].append((at - slot).total_seconds())
    return {step: spread(values) for step, values in found.items()} | {"runs": len(rows)}


def spread(values: list[float]) -> tuple[float, float]:
    """Median and max."""
    values = sorted(values)
    return (round(values[len(values) // 2], 1), round(values[-1], 1)) if values else (0, 0)


async def run(args: argparse.Namespace) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="noisy-"))
    stack = Stack(workdir)
    if args.server_fairness:  # the server's task-queue fairness (off by default in 1.32)
        stack.temporal.dynamic_config["matching.enableFairness"] = True
    workers: list[WorkerProcess] = []
    results: dict = {}
    try:
        await stack.start()
        client = stack.client
        url = stack.database()
        db = psycopg.connect(url, autocommit=True)
        task_queue = "noisy"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "DATABASE_"))}
        env |= {"TEMPORAL_ADDRESS": stack.temporal.address, "TEMPORAL_TASK_QUEUE": task_queue,
                "DATABASE_URL": url, "PYTHONUNBUFFERED": "1"}  # fmt: skip
        await runtime_attributes(client, register=True)
        for i in range(args.workers):
            log = workdir / f"worker-{i}.log"
            workers.append(WorkerProcess(env | {"WORKER_ROLE": "jobs"}, log))
        workers.append(WorkerProcess(env | {"WORKER_ROLE": "dispatch"}, workdir / "dispatch.log"))
        for w in workers:
            await asyncio.to_thread(w.wait_ready, 90)
        dispatchers = [j for j in load_catalog() if j.kind == "runtime-dispatch"]
        await sync(client, dispatchers, task_queue, prune=False)
        start = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(minutes=2)
        half = start + timedelta(minutes=args.minutes // 2)
        end = start + timedelta(minutes=args.minutes)
        last = end - timedelta(minutes=1)
        small = {} if args.small_kind == "test-noop" else {"seconds": 0}
        insert(db, args.small, "small", args.small_kind, small, start, last)
        insert(db, args.big, "big", "test-sleep", {"seconds": args.work}, half, last)
        db.execute(
            "INSERT INTO runtime_tenant_limits (tenant, max_in_flight) VALUES ('big', %s)",
            (args.limit,),
        )
        db.execute("ANALYZE")
        say(f"{args.small} small tenants from {start:%H:%M}Z, big ({args.big}, "
            f"{args.work:g} s, limit {args.limit}) from {half:%H:%M}Z, to {end:%H:%M}Z")  # fmt: skip
        load = []
        while datetime.now(UTC) < end + timedelta(minutes=1):
            load.append(os.getloadavg()[0])
            await asyncio.sleep(15)
        # The dispatchers stop, so that no slot is decided while the audit reads (the big
        # tenant's deferred slots would go on being caught up); those left are reported
        # deferred. Then the last runs: every started slot claimed and finished.
        for job in dispatchers:
            await client.get_schedule_handle(job.id).pause(note="noisy neighbour: audit")
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline and db.execute(UNSETTLED).fetchone()[0]:
            await asyncio.sleep(2)
        results["alone"] = delays(db, start, half)
        results["with_big"] = delays(db, half, end)
        results["big"] = big_figures(db, half, end)
        say("dispatcher ticks (median, max):")
        results["ticks_alone"] = ticks(db, start, half)
        results["ticks_with_big"] = ticks(db, half, end)
        results["batches_alone"] = await batch_timelines(client, db, start, half)
        results["batches_with_big"] = await batch_timelines(client, db, half, end)
        results["deferred_now"] = db.execute(
            "SELECT count(*) FROM runtime_schedules WHERE deferred_at IS NOT NULL"
        ).fetchone()[0]
        results["load"] = (min(load), max(load)) if load else None
        say(f"results: {results}")
        audit = subprocess.run(
            [sys.executable, "-m", "schedules", "audit", "--settle", "0s",
             "--from", f"{start:%Y-%m-%dT%H:%M:%SZ}", "--to", f"{end:%Y-%m-%dT%H:%M:%SZ}"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
        # The audit names each deferred schedule: counted here, its summary kept.
        summary = audit.stdout.strip().splitlines()[-1:] or [""]
        results["audit"] = (
            audit.returncode,
            summary[0].split("; ")[:3],
            audit.stdout.count("deferred by the tenant's limit"),
            [line for line in audit.stdout.splitlines()[:-1] if "deferred by" not in line][:20],
        )
        say(f"audit: exit {audit.returncode} {results['audit']} {audit.stderr[-500:]}")
        db.close()
    finally:
        for w in workers:
            w.stop()
        stack.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--big", type=int, default=5_000, help="the big tenant's schedules")
    parser.add_argument("--small", type=int, default=1_000, help="tenants of one schedule")
    parser.add_argument("--work", type=float, default=20.0, help="seconds a big slot takes")
    parser.add_argument("--limit", type=int, default=100, help="the big tenant's in flight")
    parser.add_argument(
        "--small-kind",
        default="test-noop",
        choices=("test-noop", "test-sleep"),
        help="the small tenants' kind: test-noop runs in batches (default), test-sleep "
        "(0 s) a run each",
    )
    parser.add_argument("--minutes", type=int, default=10)
    parser.add_argument(
        "--server-fairness",
        action="store_true",
        help="turn the dev server's task-queue fairness on (matching.enableFairness): the "
        "runs carry their tenant as fairness key",
    )
    parser.add_argument("--workers", type=int, default=2, help="worker processes (role jobs)")
    args = parser.parse_args(argv)
    results = asyncio.run(run(args))
    print(results)
    return 0 if results["audit"][0] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
