"""Quiet plumbing (issue 43, item 1): what an idle fleet starts for its plumbing, and how
precisely it still fires, in one run on the local stack.

Starts the stack as `make run` does (`python -m devstack`: PostgreSQL, the Temporal dev
server, the demo catalog synced, its 1,000 weekly-report runtime schedules, worker
replicas, the API) on ports of its own, waits until the engine's sessions run (the sync
at start-up started them: schedules/sync/sessions.py), then for `--minutes` (at least 10):

- counts, through Temporal's visibility API, the workflows started in the window: the
  plumbing's (the engine's jobs, `outbox-relay-*` and `runtime-dispatch-*`), the demo
  catalog's own jobs, and the bench's runtime slots, apart;
- meanwhile writes, each minute, `--slots` one-slot runtime schedules (kind `test-noop`,
  spread over the shards) for the next minute boundary, and every `--message-every`
  seconds an outbox message (an invoice reminder, mailed to the stack's SMTP sink). The
  slot's start delay: its intent marked started (the dispatcher's start returned) less its
  time; the message's: delivered (`dispatched_at`) less written (`occurred_at`), both by
  PostgreSQL's clock. p50, p99 and the worst of each.

Then `python -m schedules audit` over the stack, as an operator runs it: it must be clean.
Acceptance (issue 43): at most 1 plumbing workflow started per 10 idle minutes, both p99
at most 5 s, audit clean; exit 1 otherwise. The section is printed and, with `--out`,
appended to that file.

    .venv/bin/python bench/idle_plumbing.py --minutes 12 \\
        --out bench/results/2026-12-08-idle-plumbing.md
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from temporalio.client import Client

ROOT = Path(__file__).resolve().parent.parent
PLUMBING = ("outbox-relay-", "runtime-dispatch-")
SESSIONS = ("outbox-relay", *(f"runtime-dispatch-{i}" for i in range(4)))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


class Stack:
    """`python -m devstack` on the bench's ports, stopped by SIGINT (as Ctrl-C)."""

    def __init__(self, state: Path, base: int) -> None:
        self.state = state
        self.ports = {
            name: base + i
            for i, name in enumerate(("pg", "temporal", "ui", "smtp", "payments", "webhook", "api"))
        }
        self.proc: subprocess.Popen | None = None
        self.log = state.with_suffix(".log")

    @property
    def database_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.ports['pg']}/scheduled_jobs"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.ports['temporal']}"

    def start(self, timeout: float = 600) -> None:
        args = [sys.executable, "-m", "devstack", "--state", str(self.state)]
        for name, port in self.ports.items():
            args += [f"--{name}-port", str(port)]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "DATA"))}
        self.proc = subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=self.log.open("w"), stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + timeout
        while "API key of the demo tenant" not in self.log.read_text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the stack did not start; see {self.log}")
            time.sleep(1)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def sessions_running(db: psycopg.Connection) -> bool:
    rows = db.execute(
        "SELECT DISTINCT job_name FROM job_executions WHERE status = 'running'"
        " AND job_name = ANY(%s)",
        (list(SESSIONS),),
    ).fetchall()
    return len(rows) == len(SESSIONS)


def write_slots(db: psycopg.Connection, at: datetime, n: int, tag: str) -> None:
    """`n` one-slot runtime schedules due at `at` (their buckets: id % 16)."""
    for i in range(n):
        db.execute(
            """
            WITH n AS (SELECT nextval('runtime_schedules_id_seq') AS id)
            INSERT INTO runtime_schedules
                (id, tenant, name, kind, cron, timezone, params, catchup, shard,
                 next_fire_at, timing_since, end_at)
            SELECT id, 'bench-idle', %s, 'test-noop', '* * * * *', 'UTC', '{}', 'latest',
                   id %% 16, %s, %s, %s FROM n
            """,
            (f"{tag}-{i}", at, at, at),
        )


def write_message(db: psycopg.Connection, n: int) -> None:
    db.execute(
        "INSERT INTO outbox_messages (type, payload, idempotency_key)"
        " VALUES ('InvoiceReminder', jsonb_build_object('invoice_number', %s::text,"
        " 'due_date', '2026-11-01', 'to', 'bench@example.com'), %s)",
        (f"BENCH-{n}", f"bench-idle-{n}-{time.time_ns()}"),
    )


async def load(db: psycopg.Connection, end: datetime, slots: int, every: float) -> int:
    """Write slots each minute and messages every `every` s until `end`; messages written."""
    written = 0
    next_minute = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
    next_message = time.monotonic() + random.uniform(0, every)
    while datetime.now(UTC) < end:
        now = datetime.now(UTC)
        if next_minute - now <= timedelta(seconds=50) and next_minute <= end:
            await asyncio.sleep(random.uniform(0, 20))  # some time within the minute before
            write_slots(db, next_minute, slots, f"m{next_minute:%H%M}")
            next_minute += timedelta(minutes=1)
        if time.monotonic() >= next_message:
            write_message(db, written)
            written += 1
            next_message += every * random.uniform(0.5, 1.5)
        await asyncio.sleep(0.5)
    return written


async def started_in(client: Client, start: datetime, end: datetime) -> dict[str, list[str]]:
    query = (
        f"StartTime >= '{start.isoformat().replace('+00:00', 'Z')}'"
        f" AND StartTime < '{end.isoformat().replace('+00:00', 'Z')}'"
    )
    found: dict[str, list[str]] = {"plumbing": [], "runtime slots": [], "demo jobs": []}
    async for wf in client.list_workflows(query):
        if wf.id.startswith(PLUMBING):
            found["plumbing"].append(wf.id)
        elif wf.id.startswith("rt-"):
            found["runtime slots"].append(wf.id)
        else:
            found["demo jobs"].append(wf.id)
    return found


def delays(db: psycopg.Connection, start: datetime) -> tuple[list[float], list[float], int, int]:
    slot_delays = [
        r[0]
        for r in db.execute(
            "SELECT extract(epoch FROM i.started_at - coalesce(i.due_at, i.scheduled_at))"
            " FROM runtime_dispatch_intents i JOIN runtime_schedules s ON s.id = i.schedule_id"
            " WHERE s.tenant = 'bench-idle' AND i.started_at IS NOT NULL"
        ).fetchall()
    ]
    (slots,) = db.execute(
        "SELECT count(*) FROM runtime_schedules WHERE tenant = 'bench-idle'"
    ).fetchone()
    message_delays = [
        r[0]
        for r in db.execute(
            "SELECT extract(epoch FROM dispatched_at - occurred_at) FROM outbox_messages"
            " WHERE idempotency_key LIKE 'bench-idle-%%' AND dispatched_at IS NOT NULL"
        ).fetchall()
    ]
    (messages,) = db.execute(
        "SELECT count(*) FROM outbox_messages WHERE idempotency_key LIKE 'bench-idle-%%'"
    ).fetchone()
    return [float(d) for d in slot_delays], [float(d) for d in message_delays], slots, messages


def audit(stack: Stack) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "DATA"))}
    done = subprocess.run(
        [sys.executable, "-m", "schedules", "audit", "--settle", "0s"],
        cwd=ROOT,
        env=env | {"TEMPORAL_ADDRESS": stack.address, "DATABASE_URL": stack.database_url},
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, (done.stdout + done.stderr).strip()


async def run(args: argparse.Namespace) -> int:
    stack = Stack(Path(args.state), args.base_port)
    shutil.rmtree(stack.state, ignore_errors=True)  # a fresh stack, as a new user's
    stack.start()
    try:
        db = psycopg.connect(stack.database_url, autocommit=True)
        client = await Client.connect(stack.address)
        deadline = time.monotonic() + 120
        while not sessions_running(db):
            if time.monotonic() > deadline:
                raise SystemExit("the engine's sessions did not start")
            await asyncio.sleep(1)
        await asyncio.sleep(10)  # past the start-up's own starts
        start = datetime.now(UTC)
        end = start + timedelta(minutes=args.minutes)
        load1 = os.getloadavg()
        messages = await load(db, end, args.slots, args.message_every)
        load2 = os.getloadavg()
        settle = time.monotonic() + 90
        while True:
            slot_d, msg_d, slots, msgs = delays(db, start)
            if (len(slot_d), len(msg_d)) == (slots, msgs) or time.monotonic() > settle:
                break
            await asyncio.sleep(1)
        found = await started_in(client, start, end)
        code, verdict = audit(stack)
    finally:
        stack.stop()
    minutes = (end - start).total_seconds() / 60
    per10 = len(found["plumbing"]) / minutes * 10
    ok = (
        per10 <= 1
        and slot_d
        and msg_d
        and len(slot_d) == slots
        and len(msg_d) == msgs == messages
        and percentile(slot_d, 0.99) <= 5
        and percentile(msg_d, 0.99) <= 5
        and code == 0
    )
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()

    def figures(values: list[float]) -> str:
        if not values:
            return "none"
        return (
            f"p50 {percentile(values, 0.5):.2f} s, p99 {percentile(values, 0.99):.2f} s,"
            f" max {max(values):.2f} s"
        )

    lines = [
        f"## Idle plumbing, {start:%Y-%m-%d %H:%M} UTC ({'pass' if ok else 'FAIL'})",
        "",
        f"- Command: `.venv/bin/python bench/idle_plumbing.py --minutes {args.minutes}"
        f" --slots {args.slots} --message-every {args.message_every}`; commit {commit}",
        f"- Machine: {platform.node()}, {os.cpu_count()} cores, Python"
        f" {platform.python_version()}; load average at start {load1[0]:.2f},"
        f" at end {load2[0]:.2f}",
        "- The local stack as `make run` starts it (2 worker replicas, the demo catalog,"
        " 1,000 weekly-report runtime schedules, 4 dispatch shards).",
        f"- Window: {start:%H:%M:%S} to {end:%H:%M:%S} UTC ({minutes:.1f} min).",
        f"- Workflows started in the window: plumbing {len(found['plumbing'])}"
        f" ({per10:.2f} per 10 min; {', '.join(found['plumbing']) or 'none'}),"
        f" the demo catalog's jobs {len(found['demo jobs'])}, runtime slots' workflows"
        f" {len(found['runtime slots'])} (the bench's, in batches).",
        f"- Runtime slot start delay ({len(slot_d)} of {slots} slots started): {figures(slot_d)}",
        f"- Outbox message delay ({len(msg_d)} of {msgs} messages sent): {figures(msg_d)}",
        f"- Audit: exit {code}: {verdict.splitlines()[0] if verdict else ''}",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if code != 0:
        print(verdict)
    if args.out:
        with open(args.out, "a") as out:
            out.write(text + "\n")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=12.0, help="the idle window (>= 10)")
    parser.add_argument("--slots", type=int, default=8, help="runtime slots a minute")
    parser.add_argument("--message-every", type=float, default=20.0, help="seconds")
    parser.add_argument("--state", default="/tmp/idle-plumbing-dev", help="the stack's state")
    parser.add_argument("--base-port", type=int, default=22410, help="7 ports from here")
    parser.add_argument("--out", help="append the section to this file")
    args = parser.parse_args()
    if args.minutes < 10:
        parser.error(f"--minutes {args.minutes}: the window must be at least 10 minutes")
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
