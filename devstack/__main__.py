"""`make run`: the whole system on the embedded local stack, stopped cleanly by Ctrl-C.

Starts PostgreSQL and the Temporal dev server (state in `.dev/`), applies migrations,
loads demo invoices once, syncs the schedules, runs worker replicas and serves the HTTP API
(`python -m api serve`) with a key for the demo tenant (devstack/api.py).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from core.errors import SchedulerError
from core.queues import task_queue
from core.sql import queries
from devstack.api import DEMO_TENANT, ApiProcess, demo_key
from devstack.demo import load_demo_data, seed_weekly_reports
from devstack.mailsink import MailSink
from devstack.payments import PaymentProviderServer
from devstack.ports import require_free_port
from devstack.postgres import EmbeddedPostgres
from devstack.temporal import TemporalDevServer
from devstack.webhooks import WebhookSink
from schedules.catalog.model import load_catalog
from schedules.sync.apply import sync
from schedules.sync.report import format_report
from worker.client import connect
from worker.migrate import apply_migrations
from worker.process import exit_process
from worker.settings import Settings

DATABASE = "scheduled_jobs"
PG_PORT = 55432
TEMPORAL_PORT = 7233
UI_PORT = 8233
SMTP_PORT = 8025  # the default SMTP_PORT: the workers mail the sink without configuration
PAYMENTS_PORT = 8090  # the default PAYMENTS_URL's port: monthly-billing charges it
WEBHOOK_PORT = 8091  # the webhook receiver the workers' WEBHOOK_URL points at
API_PORT = 8088  # the default API_PORT of `python -m api serve`

logger = logging.getLogger("devstack")
_Q = queries("devstack.sql", "devstack")


def _say(message: str) -> None:
    print(f"[make run] {message}", flush=True)


def _pipe(prefix: str, stream, ready: threading.Event) -> None:
    for line in stream:
        sys.stdout.write(f"{prefix} {line}")
        sys.stdout.flush()
        if "worker ready" in line:
            ready.set()


def _spawn_worker(env: dict[str, str], prefix: str) -> tuple[subprocess.Popen, threading.Event]:
    """Start `python -m worker` in its own session (Ctrl-C reaches it as our SIGTERM)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "worker"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    ready = threading.Event()
    threading.Thread(target=_pipe, args=(prefix, proc.stdout, ready), daemon=True).start()
    return proc, ready


class LocalStack:
    def __init__(
        self,
        state: Path,
        replicas: int,
        pg_port: int,
        temporal_port: int,
        ui_port: int,
        smtp_port: int = SMTP_PORT,
        payments_port: int = PAYMENTS_PORT,
        webhook_port: int = WEBHOOK_PORT,
        api_port: int = API_PORT,
    ):
        self.state = state
        self.mail = MailSink(smtp_port, directory=state / "mail", keep=False)
        self.payments = PaymentProviderServer(payments_port)
        self.webhooks = WebhookSink(webhook_port, directory=state / "webhooks")
        self.replicas = replicas
        self.ui_port = ui_port
        self.postgres = EmbeddedPostgres(state / "postgres", pg_port)
        self.temporal = TemporalDevServer(
            temporal_port, ui_port, state / "temporal.db", state / "logs" / "temporal.log"
        )
        self.workers: list[subprocess.Popen] = []
        self.api = ApiProcess(api_port)
        self.api_key = ""

    def settings(self) -> Settings:
        return Settings(
            temporal_address=self.temporal.address,
            database_url=self.postgres.url(DATABASE),
        )

    async def start(self) -> None:
        _say(
            f"starting PostgreSQL on 127.0.0.1:{self.postgres.port} (data in {self.postgres.data_dir})"
        )
        self.postgres.start()
        url = self.postgres.create_database(DATABASE)
        applied = apply_migrations(url)
        _say(f"migrations applied: {len(applied)} new")
        with psycopg.connect(url) as conn:
            # Each job family may bring a demo.sql; each guards itself to load only once.
            load_demo_data(conn, datetime.now(UTC))
            (overdue,) = conn.execute(_Q["overdue_invoices"]).fetchone()
        _say(f"demo billing data ready: {overdue} unpaid invoices past due")
        created = await seed_weekly_reports(url)
        _say(f"runtime schedules: {created} weekly-report schedules created (1,000 customers)")

        _say(f"starting the Temporal dev server on {self.temporal.address}, UI on :{self.ui_port}")
        self.temporal.start()
        await self.temporal.wait_ready()
        settings = self.settings()
        client = await connect(settings)
        report = await sync(client, load_catalog(), settings.temporal_task_queue)
        summary = format_report(report, dry_run=False).replace("\n", "; ")
        _say(f"schedules synced: {summary}")

        self.mail.start()
        _say(f"SMTP mail sink on 127.0.0.1:{self.mail.port}, messages in {self.mail.directory}")
        self.payments.start()
        _say(f"payment provider on {self.payments.url} (monthly-billing charges it)")
        self.webhooks.start()
        _say(f"webhook receiver on {self.webhooks.url}, deliveries in {self.webhooks.directory}")
        env = os.environ | {
            "SMTP_HOST": self.mail.host,
            "SMTP_PORT": str(self.mail.port),
            "PAYMENTS_URL": self.payments.url,
            "WEBHOOK_URL": self.webhooks.url,
            "TEMPORAL_ADDRESS": settings.temporal_address,
            "TEMPORAL_TASK_QUEUE": settings.temporal_task_queue,
            "DATABASE_URL": settings.database_url.get_secret_value(),
            "PYTHONUNBUFFERED": "1",
        }
        # Before the workers: `workers ready` is the stack's last line, the API is up by then.
        # The health page links runs to this stack's Web UI, on whatever port it has.
        self.api.start(env | {"TEMPORAL_UI_URL": f"http://localhost:{self.ui_port}"})
        self.api_key, new = await demo_key(settings.database_url.get_secret_value(), self.state)
        kept = "created now" if new else f"kept in {self.state / 'api-key'}"
        _say(f"HTTP API on {self.api.url} (docs: {self.api.url}/docs)")
        _say(f"API key of the demo tenant {DEMO_TENANT} ({kept}): {self.api_key}")
        readies = []
        # The replicas run every job; one more process runs only the runtime schedules'
        # dispatchers, on their own task queue, so a herd's work never starves a tick.
        roles = [("jobs", f"worker-{i + 1} |") for i in range(self.replicas)]
        for i, (role, prefix) in enumerate([*roles, ("dispatch", "dispatcher |")]):
            proc, ready = _spawn_worker(env | _metrics_env(i) | {"WORKER_ROLE": role}, prefix)
            self.workers.append(proc)
            readies.append(ready)
        for proc, ready in zip(self.workers, readies, strict=True):
            while not ready.wait(0.2):
                if proc.poll() is not None:
                    raise SchedulerError(f"a worker exited with code {proc.returncode} at start")
        dispatch = task_queue(settings.temporal_task_queue, "dispatch")
        _say(
            f"workers ready: {self.replicas} replicas on task queue "
            f"{settings.temporal_task_queue!r}, a dispatcher on {dispatch!r}"
        )

    def stop(self) -> None:
        self.api.stop()
        for proc in self.workers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.workers:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.mail.stop()
        self.payments.stop()
        self.webhooks.stop()
        self.temporal.stop()
        self.postgres.stop()
        _say("stopped")


def _metrics_env(replica: int) -> dict[str, str]:
    """`METRICS_PORT=P` gives replica i the port P+i: replicas on one host cannot share one."""
    base = os.environ.get("METRICS_PORT", "")
    return {"METRICS_PORT": str(int(base) + replica)} if base.isdigit() else {}


def _instructions(stack: LocalStack) -> str:
    bin_dir = Path(sys.executable).parent
    # Non-default ports need the addresses spelled out in the commands.
    address = "" if stack.temporal.port == TEMPORAL_PORT else f" --address {stack.temporal.address}"
    db_env = (
        "" if stack.postgres.port == PG_PORT else f"DATABASE_URL={stack.postgres.url(DATABASE)} "
    )
    return f"""
  Temporal Web UI:   http://localhost:{stack.ui_port}/namespaces/default/schedules
  Run a job now:     {bin_dir}/temporal schedule trigger --schedule-id invoice-reminders{address}
  See the outbox:    {db_env}{bin_dir}/python -m worker outbox
  Read the mail:     {bin_dir}/python -m devstack.mailsink --dir {stack.mail.directory}
  Webhooks received: {bin_dir}/python -m devstack.webhooks --dir {stack.webhooks.directory}
  HTTP API:          curl -H "Authorization: Bearer $(cat {stack.state / "api-key"})" {stack.api.url}/v1/schedules
{_metrics_line(stack.replicas)}  Ctrl-C stops everything; the next `make run` reuses the state in {stack.state}.
"""


def _metrics_line(replicas: int) -> str:
    ports = [_metrics_env(i).get("METRICS_PORT") for i in range(replicas + 1)]  # + dispatcher
    if not ports or not all(ports):
        return ""
    return f"  Metrics:           {', '.join(f'http://localhost:{p}/metrics' for p in ports)}\n"


def _ports(args: argparse.Namespace) -> list[tuple[str, str, int]]:
    """Each port the stack listens on: the option that moves it, what it is for, the port."""
    return [
        ("--pg-port", "PostgreSQL", args.pg_port),
        ("--temporal-port", "the Temporal dev server", args.temporal_port),
        ("--ui-port", "the Temporal Web UI", args.ui_port),
        ("--smtp-port", "the SMTP mail sink", args.smtp_port),
        ("--payments-port", "the payment provider", args.payments_port),
        ("--webhook-port", "the webhook receiver", args.webhook_port),
        ("--api-port", "the HTTP API", args.api_port),
    ]


class StartInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) while the stack starts: raised where start-up is, so a step that
    blocks (pg_ctl, migrations, a worker's start) ends at once and what started stops. A
    KeyboardInterrupt, so that asyncio lets it out of the loop when it lands in a callback
    or in the loop's wait; asyncio.run then cancels main, whose `finally` stops the stack."""


def _interrupt_start(signum: int, frame: object) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):  # the stopping that follows is not cut short
        signal.signal(sig, signal.SIG_IGN)
    raise StartInterrupted


async def main(args: argparse.Namespace) -> int:
    stack = LocalStack(
        args.state.resolve(),
        args.replicas,
        args.pg_port,
        args.temporal_port,
        args.ui_port,
        args.smtp_port,
        args.payments_port,
        args.webhook_port,
        args.api_port,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _interrupt_start)
    try:
        for flag, what, port in _ports(args):
            require_free_port(port, what, flag=flag)
        try:
            await stack.start()
        except (StartInterrupted, asyncio.CancelledError):  # cancelled: see __main__
            _say("interrupted while starting: stopping what started")
            return 130
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        print(_instructions(stack), flush=True)
        await stop.wait()
        _say("stopping: draining workers, then Temporal and PostgreSQL")
        return 0
    except SchedulerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        stack.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m devstack", description=__doc__)
    parser.add_argument("--state", type=Path, default=Path(".dev"), help="where state lives")
    parser.add_argument("--replicas", type=int, default=2, help="worker processes to run")
    parser.add_argument("--pg-port", type=int, default=PG_PORT)
    parser.add_argument("--temporal-port", type=int, default=TEMPORAL_PORT)
    parser.add_argument("--ui-port", type=int, default=UI_PORT)
    parser.add_argument("--smtp-port", type=int, default=SMTP_PORT, help="the mail sink's port")
    parser.add_argument(
        "--payments-port", type=int, default=PAYMENTS_PORT, help="the payment provider's port"
    )
    parser.add_argument(
        "--webhook-port", type=int, default=WEBHOOK_PORT, help="the webhook receiver's port"
    )
    parser.add_argument("--api-port", type=int, default=API_PORT, help="the HTTP API's port")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    try:
        code = asyncio.run(main(args))
    except StartInterrupted:  # while the event loop waited: main's task was cancelled
        code = 130
    exit_process(code)
