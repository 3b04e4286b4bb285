"""The outbox relay against real servers: aiosmtpd for email, an HTTP server for webhooks.

Relays run in the test's event loop, each with its own connection pool (so several relays
are several PostgreSQL sessions claiming side by side), or as the `outbox-relay` job on real
worker processes. Nothing is mocked; every wait polls with a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool
from pydantic import SecretStr

from devstack import free_port
from devstack.mailsink import MailSink
from jobs.outbox_relay.activities import Relay, RelayConfig
from jobs.outbox_relay.transports import SmtpConfig, WebhookConfig
from schedules.catalog.model import default_catalog
from tests.helpers import assert_eventually
from tests.helpers.http import LocalServer, QuietHandler
from tests.integration.jobs import FAST_RETRY, executions, registered

DOMAIN = "billing.example.test"


# --- servers --------------------------------------------------------------------------


@pytest.fixture
def sink() -> Iterator[MailSink]:
    server = MailSink(free_port()).start()
    yield server
    server.stop()


class Webhook(LocalServer):
    """A local HTTP server that records each POST; `answers[id]` lists statuses to give."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.answers: dict[str, list[int]] = {}
        self._lock = threading.Lock()
        hook = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the relay's client uses it

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with hook._lock:
                    hook.requests.append({"headers": dict(self.headers), "body": body})
                    planned = hook.answers.get(body["id"]) or [200]
                    status = planned.pop(0) if len(planned) > 1 else planned[0]
                reply = b"ok" if status < 300 else b"no thanks"
                self.send_response(status)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        super().__init__(Handler)
        self.url = f"http://127.0.0.1:{self.port}/hooks/outbox?token=s3cret"


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    server = Webhook()
    yield server
    server.stop()


# --- helpers --------------------------------------------------------------------------


def config(sink: MailSink, webhook: Webhook | None = None, **overrides: Any) -> RelayConfig:
    """A relay config for tests: the test's servers, quick retries."""
    base = RelayConfig(
        smtp=SmtpConfig(
            host=sink.host,
            port=sink.port,
            sender=f"Billing <billing@{DOMAIN}>",
            timeout_seconds=5,
        ),
        webhook=WebhookConfig(SecretStr(webhook.url), timeout_seconds=5) if webhook else None,
        batch_size=50,
        concurrency=5,
        lease_seconds=3600,  # a batch never outlasts its lease here, however slow the machine
        backoff_base_seconds=0.1,
        backoff_max_seconds=0.5,
    )
    return replace(base, **overrides)


@contextlib.asynccontextmanager
async def relay(database_url: str, cfg: RelayConfig, holder: str = "test") -> AsyncIterator[Relay]:
    async with (
        AsyncConnectionPool(database_url, min_size=1, max_size=3, open=False) as pool,
        Relay(pool, cfg, holder=holder) as r,
    ):
        yield r


# A relay's time budget that a drain never reaches: it returns once nothing is due.
UNTIL_DONE = 3600.0


def insert_reminders(db: psycopg.Connection, n: int, start: int = 1) -> None:
    db.execute(
        """
        INSERT INTO outbox_messages (type, payload, idempotency_key)
        SELECT 'InvoiceReminder',
               jsonb_build_object('invoice_number', 'INV-' || n, 'due_date', '2026-11-01',
                                  'to', 'customer' || n || '@example.com'),
               'test-reminder:' || n
        FROM generate_series(%s::int, %s::int) AS n
        """,
        (start, start + n - 1),
    )


def insert_message(db: psycopg.Connection, type_: str, payload: dict, key: str) -> str:
    return str(
        db.execute(
            "INSERT INTO outbox_messages (type, payload, idempotency_key) VALUES (%s, %s, %s) "
            "RETURNING id",
            (type_, Jsonb(payload), key),
        ).fetchone()[0]
    )


def rows(db: psycopg.Connection) -> list[dict]:
    return (
        db.cursor(row_factory=dict_row)
        .execute("SELECT * FROM outbox_messages ORDER BY idempotency_key")
        .fetchall()
    )


def state(db: psycopg.Connection) -> dict[str, int]:
    return (
        db.cursor(row_factory=dict_row)
        .execute(
            """
            SELECT count(*) FILTER (WHERE dispatched_at IS NULL AND dead_at IS NULL) AS pending,
                   count(*) FILTER (WHERE dispatched_at IS NOT NULL) AS dispatched,
                   count(*) FILTER (WHERE dead_at IS NOT NULL) AS dead
            FROM outbox_messages
            """
        )
        .fetchone()
    )


def message_ids(db: psycopg.Connection) -> set[str]:
    return {f"<{row['id']}@{DOMAIN}>" for row in rows(db)}


# --- tests ----------------------------------------------------------------------------


async def test_each_email_is_delivered_once_with_the_message_id_as_message_id(
    db, database_url, sink
):
    insert_reminders(db, 120)
    async with relay(database_url, config(sink)) as r:
        counts = await r.drain(max_seconds=UNTIL_DONE)
    assert counts.claimed == counts.delivered == 120 and counts.batches == 3
    assert state(db) == {"pending": 0, "dispatched": 120, "dead": 0}
    assert sorted(sink.message_ids()) == sorted(message_ids(db))
    one = next(m for m in sink.messages if m["To"] == "customer7@example.com")
    assert one["Subject"] == "Payment reminder: invoice INV-7"
    assert one["From"] == f"Billing <billing@{DOMAIN}>"
    assert "INV-7, due on 2026-11-01" in one.get_content()
    assert {r["attempts"] for r in rows(db)} == {1}
    assert {r["claimed_by"] for r in rows(db)} == {"test"}


async def test_smtp_down_for_a_while_then_back_delivers_every_message(db, database_url, sink):
    sink.stop()  # the port stays ours: nothing listens on it for now
    insert_reminders(db, 60)
    cfg = config(sink, max_attempts=40)

    async with relay(database_url, cfg) as r:
        done = asyncio.Event()

        async def keep_relaying() -> None:
            while not done.is_set():
                await r.drain(max_seconds=1, poll_seconds=0.05)

        loop = asyncio.create_task(keep_relaying())
        try:

            async def every_message_failed_twice():
                failed = rows(db)
                assert all(m["attempts"] >= 2 for m in failed)
                return failed

            failed = await assert_eventually(every_message_failed_twice, timeout=30)
            assert all("unavailable" in m["last_error"] for m in failed), failed[0]["last_error"]
            assert state(db)["dead"] == 0

            sink.start()

            async def all_delivered():
                assert state(db) == {"pending": 0, "dispatched": 60, "dead": 0}

            await assert_eventually(all_delivered, timeout=30)
        finally:
            done.set()
            await loop
    received = sink.message_ids()
    assert sorted(received) == sorted(message_ids(db))  # each once: none lost, none twice
    assert all(m["last_error"] is None for m in rows(db))


async def test_three_relays_share_the_work_and_deliver_nothing_twice(db, database_url, sink):
    insert_reminders(db, 1500)
    cfg = config(sink, batch_size=25, concurrency=4)

    async def run(name: str) -> int:
        async with relay(database_url, cfg, holder=name) as r:
            return (await r.drain(max_seconds=UNTIL_DONE)).delivered

    delivered = await asyncio.gather(*(run(f"relay-{i}") for i in range(3)))
    assert sum(delivered) == 1500
    assert all(n > 0 for n in delivered), delivered  # every relay took a share
    received = sink.message_ids()
    assert len(received) == len(set(received)) == 1500
    assert set(received) == message_ids(db)
    by_relay = db.execute(
        "SELECT claimed_by, count(*) FROM outbox_messages GROUP BY 1 ORDER BY 1"
    ).fetchall()
    assert [name for name, _ in by_relay] == ["relay-0", "relay-1", "relay-2"]
    assert {r["attempts"] for r in rows(db)} == {1}


async def test_a_malformed_payload_goes_dead_with_a_clear_error_while_the_others_flow(
    db, database_url, sink
):
    insert_reminders(db, 30)
    missing = insert_message(db, "InvoiceReminder", {"invoice_number": "INV-X"}, "bad:missing")
    not_address = insert_message(
        db, "InvoiceReminder", {"invoice_number": "INV-Y", "to": "not an address"}, "bad:addr"
    )
    injected = insert_message(
        db,
        "InvoiceReminder",
        {"invoice_number": "INV-Z", "to": "a@example.com\r\nBcc: everyone@example.com"},
        "bad:inject",
    )
    async with relay(database_url, config(sink)) as r:
        counts = await r.drain(max_seconds=UNTIL_DONE)
    assert (counts.delivered, counts.dead, counts.retried) == (30, 3, 0)
    assert len(sink.message_ids()) == 30
    dead = {str(m["id"]): m for m in rows(db) if m["dead_at"] is not None}
    assert set(dead) == {missing, not_address, injected}
    assert dead[missing]["last_error"] == (
        "malformed payload: InvoiceReminder email needs a non-empty string field 'to', got nothing"
    )
    assert "field 'to' is not one email address" in dead[not_address]["last_error"]
    assert "field 'to' is not one email address" in dead[injected]["last_error"]
    assert {m["attempts"] for m in dead.values()} == {1}  # permanent: never retried
    assert not any("everyone@" in str(m["Bcc"]) for m in sink.messages)

    # Dead stays dead, visible; another run does not pick them up.
    async with relay(database_url, config(sink)) as r:
        assert (await r.drain(max_seconds=UNTIL_DONE)).claimed == 0
    assert state(db) == {"pending": 0, "dispatched": 30, "dead": 3}


async def test_webhook_delivery_carries_the_message_id_as_idempotency_key(
    db, database_url, sink, webhook
):
    ids = [
        insert_message(db, "ReconciliationAlert", {"day": f"2026-11-0{i}", "delta": i}, f"rec:{i}")
        for i in range(1, 6)
    ]
    flaky, rejected = ids[1], ids[2]
    webhook.answers = {flaky: [503, 200], rejected: [422]}
    cfg = config(sink, webhook)

    async with relay(database_url, cfg) as r:

        async def settled():
            await r.drain(max_seconds=1)
            assert state(db) == {"pending": 0, "dispatched": 4, "dead": 1}

        await assert_eventually(settled, timeout=30)

    by_id: dict[str, list[dict]] = {}
    for request in webhook.requests:
        by_id.setdefault(request["body"]["id"], []).append(request)
    assert set(by_id) == set(ids)
    for message_id, requests in by_id.items():
        for request in requests:
            assert request["headers"]["Idempotency-Key"] == message_id
            assert request["headers"]["X-Outbox-Type"] == "ReconciliationAlert"
            assert request["body"]["type"] == "ReconciliationAlert"
    assert len(by_id[flaky]) == 2  # 503, then the same key again: 200
    assert len(by_id[rejected]) == 1  # 422 is permanent
    assert by_id[ids[0]][0]["body"]["payload"] == {"day": "2026-11-01", "delta": 1}
    messages = {str(m["id"]): m for m in rows(db)}
    assert messages[flaky]["attempts"] == 2 and messages[flaky]["dispatched_at"] is not None
    assert (
        messages[rejected]["last_error"]
        == "webhook answered HTTP 422 Unprocessable Entity: no thanks"
    )
    assert not any("s3cret" in (m["last_error"] or "") for m in messages.values())
    assert sink.message_ids() == []


async def test_webhook_types_wait_while_the_webhook_is_unset(db, database_url, sink, webhook):
    insert_reminders(db, 3)
    alert = insert_message(db, "ReconciliationAlert", {"delta": 12}, "rec:wait")
    async with relay(database_url, config(sink)) as r:
        counts = await r.drain(max_seconds=UNTIL_DONE)
        assert await r.waiting_without_transport() == 1
    assert counts.delivered == 3
    waiting = next(m for m in rows(db) if str(m["id"]) == alert)
    assert waiting["attempts"] == 0 and waiting["dead_at"] is None and waiting["last_error"] is None

    # Configured later, the webhook receives it.
    async with relay(database_url, config(sink, webhook)) as r:
        assert (await r.drain(max_seconds=UNTIL_DONE)).delivered == 1
    assert [q["body"]["id"] for q in webhook.requests] == [alert]


async def test_a_relay_that_dies_mid_batch_loses_nothing(db, database_url, sink):
    insert_reminders(db, 40)
    # Relay A claims a batch and dies: it never delivers or records.
    async with relay(database_url, config(sink), holder="dead") as a:
        claimed = await a._claim(25)
    assert len(claimed.messages) == 25

    async with relay(database_url, config(sink), holder="survivor") as b:
        first = await b.drain(max_seconds=UNTIL_DONE)
        assert first.delivered == 15  # the leased 25 are not due while the lease lasts

        # A's lease runs out (moved to now rather than waited for): B delivers them.
        db.execute(
            "UPDATE outbox_messages SET next_attempt_at = now()"
            " WHERE claimed_by = 'dead' AND dispatched_at IS NULL"
        )
        second = await b.drain(max_seconds=UNTIL_DONE)
        assert second.delivered == 25
        assert state(db) == {"pending": 0, "dispatched": 40, "dead": 0}
    assert sorted(sink.message_ids()) == sorted(message_ids(db))
    assert {r["claimed_by"] for r in rows(db)} == {"survivor"}


async def test_a_stopped_relay_records_what_it_delivered_and_releases_the_rest(
    db, database_url, sink
):
    sink.delay = 0.2  # a slow server: the batch is still on the wire when the relay stops
    insert_reminders(db, 20)
    async with relay(database_url, config(sink, batch_size=20, concurrency=2)) as r:
        task = asyncio.create_task(r.drain(max_seconds=UNTIL_DONE))

        async def some_delivered():
            assert sink.received >= 3

        await assert_eventually(some_delivered, timeout=10, interval=0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    after = state(db)
    assert after["dead"] == 0 and after["pending"] > 0 and after["dispatched"] > 0
    unsent = [m for m in rows(db) if m["dispatched_at"] is None]
    # Released: due at once, no attempt counted, no claim left.
    assert all(m["attempts"] == 0 and m["claim_token"] is None for m in unsent)

    sink.delay = 0
    async with relay(database_url, config(sink)) as r:
        await r.drain(max_seconds=UNTIL_DONE)
    assert state(db) == {"pending": 0, "dispatched": 20, "dead": 0}
    # At least once: a message cut off mid-send may arrive twice, none is missing.
    assert set(sink.message_ids()) == message_ids(db)
    assert len(sink.message_ids()) <= 20 + 2


async def test_the_outbox_relay_job_delivers_each_message_once_run_after_run(
    client, db, task_queue, start_workers, sink
):
    """The catalog's job on three worker processes: one run at a time (overlap SKIP) picks
    up whatever is due; each run's record carries its counts."""
    insert_reminders(db, 200)
    start_workers(3, SMTP_PORT=str(sink.port), OUTBOX_MESSAGE_ID_DOMAIN=DOMAIN)
    job = default_catalog()["outbox-relay"].model_copy(
        update={
            "cron": None,
            "interval": timedelta(seconds=2),
            "overlap": "skip",
            "params": {"max_seconds": 1.0, "poll_seconds": 0.2, "batch_size": 40},
            "retry": FAST_RETRY,
        }
    )
    async with registered(client, job, task_queue):

        def delivered(n: int):
            async def check():
                assert state(db) == {"pending": 0, "dispatched": n, "dead": 0}

            return check

        await assert_eventually(delivered(200), timeout=90)
        insert_reminders(db, 100, start=201)  # a later wave: a later run takes it
        await assert_eventually(delivered(300), timeout=90)

        async def runs_recorded():
            runs = [r for r in executions(db, job.id) if r["status"] == "completed"]
            assert sum(r["result"]["counts"]["delivered"] for r in runs) == 300
            return runs

        runs = await assert_eventually(runs_recorded, timeout=30)
    assert all(set(r["result"]["counts"]) >= {"delivered", "dead", "batches"} for r in runs)
    assert not [r for r in executions(db, job.id) if r["status"] == "failed"]
    received = sink.message_ids()
    assert len(received) == len(set(received)) == 300
    assert set(received) == message_ids(db)
