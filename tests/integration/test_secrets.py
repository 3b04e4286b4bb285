"""No secret in any log, stored error, printed error or workflow history.

Every job of the packaged catalog and the outbox relay run on real worker processes (one
logging text, one JSON, both at DEBUG) configured with a PostgreSQL password that the
server really checks, an SMTP password the mail server really checks, and a webhook URL
with a token and a password in it, at a receiver that echoes its request line back in its
first answer. Then every log line, `last_error`, `error`, command output and workflow
history is searched for the secrets: none may appear.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
from psycopg.types.json import Jsonb
from pydantic import SecretStr

from core.queues import task_queue as fleet_queue
from devstack import free_port
from devstack.demo import load_demo_data
from devstack.mailsink import MailSink, _Handler
from devstack.payments import PaymentProviderServer
from schedules.catalog.model import default_catalog
from tests.helpers import ROOT, assert_eventually, python_m, wait_for_text
from tests.helpers.http import LocalServer, QuietHandler
from tests.helpers.worker import settings_env
from tests.integration.jobs import registered

DB_PASSWORD = "db-Pa55-SECRET-7"
SMTP_USER = "relay"
SMTP_PASSWORD = "smtp-Pa55-SECRET-8"
HOOK_TOKEN = "hook-T0KEN-SECRET-9"
PAYMENTS_KEY = "pay-K3Y-SECRET-11"
HOOK_PASSWORD = "hook-Pa55-SECRET-10"
SECRETS = [
    DB_PASSWORD,
    SMTP_PASSWORD,
    HOOK_TOKEN,
    PAYMENTS_KEY,
    HOOK_PASSWORD,
    base64.b64encode(f"\0{SMTP_USER}\0{SMTP_PASSWORD}".encode()).decode(),  # AUTH PLAIN
    base64.b64encode(f"hooker:{HOOK_PASSWORD}".encode()).decode(),  # Basic auth
]
ROLE = "sj_secret_user"


# --- servers that check and echo the secrets ----------------------------------------------


class AuthSink(MailSink):
    """The mail sink, requiring AUTH with `SMTP_USER` / `SMTP_PASSWORD` (no TLS here)."""

    logins: list[str]

    def start(self) -> AuthSink:
        self.logins = []

        def authenticator(server, session, envelope, mechanism, data) -> AuthResult:
            ok = isinstance(data, LoginPassword) and (data.login, data.password) == (
                SMTP_USER.encode(),
                SMTP_PASSWORD.encode(),
            )
            self.logins.append(f"{mechanism}:{ok}")
            return AuthResult(success=ok)

        # AUTH offered without TLS (this is loopback); mail without a login is refused below
        # (aiosmtpd's own auth_required warns when TLS is not required too).
        self._controller = Controller(
            _AuthHandler(self),
            hostname=self.host,
            port=self.port,
            authenticator=authenticator,
            auth_require_tls=False,
        )
        self._controller.start()
        return self


class _AuthHandler(_Handler):
    async def handle_DATA(self, server, session, envelope) -> str:
        if not session.authenticated:
            return "530 5.7.0 Authentication required"
        return await super().handle_DATA(server, session, envelope)


class EchoingWebhook(LocalServer):
    """Answers each message's first POST 500 with its request line and headers echoed (as
    careless receivers do), every later one 200; a message with `reject` gets 400 and the
    echo, every time (it goes dead, its error kept)."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        answered: set[str] = set()
        hook = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                hook.seen.append(self.requestline)
                first = body["id"] not in answered
                answered.add(body["id"])
                rejected = body["payload"].get("reject", False)
                echo = f"you sent: {self.requestline} authorization={self.headers['Authorization']}"
                reply = (echo if first or rejected else "ok").encode()
                self.send_response(400 if rejected else 500 if first else 200)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        super().__init__(Handler)
        port = self.port
        self.url = f"http://hooker:{HOOK_PASSWORD}@127.0.0.1:{port}/hooks/in?token={HOOK_TOKEN}"


@pytest.fixture
def password_url(postgres, database_url: str) -> Iterator[str]:
    """The test database through a role whose password PostgreSQL checks (scram)."""
    hba = postgres.data_dir / "pg_hba.conf"
    original = hba.read_text()
    with psycopg.connect(postgres.url(), autocommit=True) as conn:
        conn.execute(f"DROP ROLE IF EXISTS {ROLE}")
        conn.execute(f"CREATE ROLE {ROLE} LOGIN SUPERUSER PASSWORD '{DB_PASSWORD}'")
        hba.write_text(f"host all {ROLE} 127.0.0.1/32 scram-sha-256\n" + original)
        conn.execute("SELECT pg_reload_conf()")
    url = database_url.replace("postgresql://postgres@", f"postgresql://{ROLE}:{DB_PASSWORD}@")
    try:
        with psycopg.connect(url.replace(DB_PASSWORD, "wrong"), connect_timeout=5) as _:
            raise AssertionError("the password is not checked")
    except psycopg.OperationalError as exc:
        assert "password authentication failed" in str(exc)
    yield url
    hba.write_text(original)
    with psycopg.connect(postgres.url(), autocommit=True) as conn:
        conn.execute("SELECT pg_reload_conf()")


class DebugWorker:
    """`python -m worker --debug`: every logger at DEBUG, the most a log can say."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log
        self._out = log.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "worker", "--debug"],
            cwd=ROOT,
            env=env,
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(60)
        self._out.close()


def command(env: dict[str, str], *args: str) -> str:
    done = python_m(list(args), env)
    assert "Traceback" not in done.stderr, done.stderr
    return f"$ {' '.join(args)} -> {done.returncode}\n{done.stdout}{done.stderr}"


async def test_no_secret_in_logs_stored_errors_outputs_or_histories(
    client, db, settings, password_url, task_queue, tmp_path
):
    load_demo_data(db, datetime.now(UTC))
    db.execute(
        "INSERT INTO outbox_messages (type, payload, idempotency_key) "
        "VALUES ('PaymentsAlert', %s, 'k1'), ('PaymentsAlert', %s, 'k2')",
        (Jsonb({"note": "a webhook message"}), Jsonb({"reject": True})),
    )
    sink = AuthSink(free_port()).start()
    hook = EchoingWebhook()
    payments = PaymentProviderServer(free_port(), api_key=PAYMENTS_KEY)
    payments.start()
    env = settings_env(
        settings.model_copy(update={"database_url": SecretStr(password_url)}),
        SMTP_HOST=sink.host,
        SMTP_PORT=str(sink.port),
        SMTP_USERNAME=SMTP_USER,
        SMTP_PASSWORD=SMTP_PASSWORD,
        WEBHOOK_URL=hook.url,
        PAYMENTS_URL=payments.url,
        PAYMENTS_API_KEY=PAYMENTS_KEY,
        OUTBOX_BACKOFF_BASE_SECONDS="0.2",
        OUTBOX_BACKOFF_MAX_SECONDS="0.5",
        OUTBOX_EMAIL_TYPES="InvoiceReminder",
    )
    logs = [tmp_path / "worker-text.log", tmp_path / "worker-json.log"]
    workers = [
        DebugWorker(env | {"LOG_FORMAT": "text"}, logs[0]),
        DebugWorker(env | {"LOG_FORMAT": "json"}, logs[1]),
    ]
    outputs = []
    try:
        for log in logs:
            wait_for_text(log, "worker ready", timeout=60)
        catalog = default_catalog()
        # One schedule at a time: no job waits for another's (nightly-reconcile's upstream
        # hourly-sync is gone by then; test_dependencies.py runs dependencies).
        quiet = {"paused": True, "note": "secrets test", "depends_on": []}
        jobs = [job.model_copy(update=quiet) for job in catalog.values()]
        # A dispatcher's triggered run ticks once, not a session of hours.
        jobs = [
            job.model_copy(update={"params": job.params | {"max_seconds": 0}})
            if job.kind == "runtime-dispatch"
            else job
            for job in jobs
        ]
        relay = next(j for j in jobs if j.id == "outbox-relay")
        relay = relay.model_copy(update={"params": {"max_seconds": 6, "poll_seconds": 0.2}})
        others = [j for j in jobs if j.id != "outbox-relay"]
        async with registered(client, relay, task_queue):
            for job in others:
                async with registered(client, job, task_queue):
                    await client.get_schedule_handle(job.id).trigger()

                    async def finished(job_id=job.id):
                        row = db.execute(
                            "SELECT status FROM job_executions WHERE job_name = %s", (job_id,)
                        ).fetchone()
                        assert row is not None and row[0] == "completed", (job_id, row)

                    await assert_eventually(finished, timeout=90)

            async def all_delivered():
                (pending,) = db.execute(
                    "SELECT count(*) FROM outbox_messages "
                    "WHERE dispatched_at IS NULL AND dead_at IS NULL"
                ).fetchone()
                if pending:
                    running = (await client.get_schedule_handle(relay.id).describe()).info
                    if not running.running_actions:
                        await client.get_schedule_handle(relay.id).trigger()
                assert pending == 0

            await assert_eventually(all_delivered, timeout=120, interval=1)

        # The commands an operator runs, with the same settings, and with broken ones.
        unreachable = password_url.replace(f":{urlsplit(password_url).port}/", ":1/")
        malformed = f"postgresql://{ROLE}:{DB_PASSWORD}@[::1/jobs"
        for database in (password_url, unreachable, malformed):
            run_env = env | {"DATABASE_URL": database}
            outputs += [
                command(run_env, "schedules", "list"),
                command(run_env, "schedules", "describe", "invoice-reminders"),
                command(run_env, "schedules", "check", "--timeout", "5"),
                command(run_env, "worker", "outbox"),
                command(run_env, "worker", "migrate"),
            ]
    finally:
        for process in workers:
            process.stop()
        sink.stop()
        hook.stop()
        payments.stop()

    # The secrets were really used: the receiver saw the token, the sink checked the login.
    assert any(HOOK_TOKEN in line for line in hook.seen)
    assert "PLAIN:True" in sink.logins or "LOGIN:True" in sink.logins
    assert payments.charged(), "monthly-billing charged nothing: the API key was refused"
    (echoed,) = db.execute(
        "SELECT last_error FROM outbox_messages WHERE idempotency_key = 'k2' AND dead_at IS NOT NULL"
    ).fetchone()
    assert (
        echoed.startswith("webhook answered HTTP 400") and "you sent: POST *** HTTP/1.1" in echoed
    )

    stored = [
        str(row)
        for row in db.execute(
            "SELECT last_error FROM outbox_messages UNION ALL SELECT error FROM job_executions"
        ).fetchall()
    ]
    histories = []
    dispatch = fleet_queue(task_queue, "dispatch")  # the runtime dispatchers' runs
    async for run in client.list_workflows(
        f'TaskQueue = "{task_queue}" OR TaskQueue = "{dispatch}"'
    ):
        history = await client.get_workflow_handle(run.id, run_id=run.run_id).fetch_history()
        histories.append(history.to_json())
    assert len(histories) >= len(catalog)
    texts = {
        "worker logs": "\n".join(log.read_text(errors="replace") for log in logs),
        "stored errors": "\n".join(stored),
        "command outputs": "\n".join(outputs),
        "workflow histories": "\n".join(histories),
    }
    for where, text in texts.items():
        for secret in SECRETS:
            assert secret not in text, f"{secret!r} found in {where}"
    assert "webhook answered HTTP 400" in texts["stored errors"]
    assert "PostgreSQL is unavailable" in texts["command outputs"]
    assert "DATABASE_URL: is not a valid PostgreSQL connection string" in texts["command outputs"]
