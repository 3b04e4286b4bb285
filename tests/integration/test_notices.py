"""Notices that reach the owner (issue 40, item 4) on real servers: a failed, auto-paused,
lost and late slot each give one notice, queued with the event, and the relay delivers them
to a real local webhook receiver, which verifies each signature with the
`standardwebhooks` package (an independent implementation of the scheme) and de-duplicates
by `webhook-id`. A relay process is SIGKILLed with the POSTs on the wire, received and not
yet answered, so not marked sent; another relay delivers them again, and the receiver
keeps each notice exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool
from standardwebhooks import Webhook, WebhookVerificationError

from core.errors import ScheduleNotFoundError
from devstack import free_port
from devstack.mailsink import MailSink
from jobs.outbox_relay.activities import Relay, RelayConfig
from jobs.outbox_relay.transports import SmtpConfig
from schedules import tenants
from schedules.health.status import ScheduleState
from schedules.notices import notify_findings
from tests.helpers import ROOT, assert_eventually
from tests.helpers.audit import audit_report, audited
from tests.helpers.http import LocalServer, QuietHandler
from tests.integration import runtime
from tests.integration.jobs import executions, invoice_job, registered, trigger_at
from tests.integration.runtime import customer
from tests.integration.test_runtime_batch import weekly_batch
from tests.integration.test_runtime_schedules_cli import cli, one_error_line

pytestmark = pytest.mark.timeout(240)

NOW = datetime(2026, 11, 30, 13, 0, tzinfo=UTC)


class Receiver(LocalServer):
    """A webhook receiver as a customer would write one: every request verified with the
    tenant's secret (a bad one answered 401), each `webhook-id` processed once. While
    `gate` is closed a request is recorded and then held, unanswered; the first
    `unavailable` verified requests are answered 503 (the relay retries them)."""

    def __init__(self) -> None:
        self.secret = ""
        self.raw: list[str] = []  # webhook-id of each request, verified or not
        self.processed: dict[str, dict[str, Any]] = {}  # by webhook-id: once each
        self.rejected = 0
        self.unavailable = 0
        self.gate = threading.Event()
        self._lock = threading.Lock()
        receiver = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                headers = {k.lower(): v for k, v in self.headers.items()}
                with receiver._lock:
                    receiver.raw.append(headers.get("webhook-id", ""))
                receiver.gate.wait()
                try:
                    payload = Webhook(receiver.secret).verify(body, headers)
                except WebhookVerificationError:
                    with receiver._lock:
                        receiver.rejected += 1
                    return self._answer(401)
                with receiver._lock:
                    if receiver.unavailable > 0:
                        receiver.unavailable -= 1
                        return self._answer(503)
                    receiver.processed.setdefault(headers["webhook-id"], payload)
                self._answer(204)

            def _answer(self, status: int) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:
                    pass  # the relay that sent it is dead

        super().__init__(Handler)
        self.url = f"http://127.0.0.1:{self.port}/notices?token=t0ken"

    def stop(self) -> None:
        self.gate.set()
        super().stop()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.stop()


# A relay in a process of its own: the one the test kills.
RELAY_PROCESS = """
import asyncio, sys
from psycopg_pool import AsyncConnectionPool
import jobs
from core.errors import ScheduleNotFoundError
from activities.run.kinds import build_runtime_kinds
from activities.runtime.runs import RuntimeActivities
from activities.runtime.models import BatchInput, batch_workflow_id
from jobs.outbox_relay.activities import Relay, RelayConfig
from jobs.outbox_relay.transports import SmtpConfig

async def main():
    smtp = SmtpConfig(host="127.0.0.1", port=9, sender="jobs@example.test")
    async with AsyncConnectionPool(sys.argv[1], min_size=1, max_size=2, open=False) as pool:
        config = RelayConfig(smtp=smtp, lease_seconds=3600)
        async with Relay(pool, config, holder="doomed") as relay:
            await relay.drain(max_seconds=3600, poll_seconds=0.1)

asyncio.run(main())
"""


def notices(db: psycopg.Connection) -> list[tuple]:
    return db.execute(
        "SELECT type, payload->>'event', dispatched_at IS NOT NULL, dead_at IS NOT NULL,"
        " claimed_by, payload::text FROM outbox_messages WHERE type LIKE 'Notice%'"
        " ORDER BY payload->>'event'"
    ).fetchall()


async def lost_and_late(db, database_url, client, task_queue, job) -> int:
    """A history of `job` seeded as a fault leaves it (never run: nothing of it is on
    Temporal): hourly fire times, the first run 10 minutes late, the second lost. The real
    audit finds both; `notify_findings` records them and queues their notices."""
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=4)
    slots = [hour + timedelta(hours=i) for i in range(3)]
    for slot, started in ((slots[0], slots[0] + timedelta(minutes=10)), (slots[2], slots[2])):
        db.execute(
            "INSERT INTO job_executions (job_name, scheduled_at, status, origin, started_at,"
            " finished_at) VALUES (%s, %s, 'completed', 'scheduled', %s, %s)",
            (job.id, slot, started, started + timedelta(seconds=1)),
        )
    report = await audit_report(
        client,
        database_url,
        task_queue,
        [job],
        start=slots[0],
        end=slots[2] + timedelta(minutes=1),
        states={job.id: ScheduleState(exists=True, timing_since=slots[0])},
    )
    found = sorted((f.kind, f.slot) for f in report.findings if f.kind in ("lost", "late"))
    assert found == [("late", slots[0]), ("lost", slots[1])], report.findings
    new = await notify_findings(database_url, report.findings, {job.id: job})
    # The audit run again finds them again; nothing is queued twice.
    assert await notify_findings(database_url, report.findings, {job.id: job}) == 0
    return new


async def test_each_notice_reaches_the_webhook_once_after_the_relay_dies_mid_delivery(
    client, db, database_url, task_queue, start_workers, receiver
):
    channels = await tenants.set_notices(database_url, "acme", webhook_url=receiver.url)
    receiver.secret = channels.secret
    start_workers(1)
    # Rejected by the job's params model: its run fails, and pauses the schedule (K = 1).
    # Yearly: its cron adds no run of its own to the triggered one.
    job = invoice_job(chunk_size=0).model_copy(
        update={
            "pause_after_failures": 1,
            "notify": "acme",
            "paused": False,
            "note": "",
            "cron": "0 0 1 1 *",
        }
    )
    gaps = job.model_copy(
        update={"id": "notice-gaps", "cron": "0 * * * *", "timezone": "UTC"}
        | {"starting_deadline": None, "paused": True}
    )
    slot = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1)
    async with registered(client, job, task_queue):
        await trigger_at(client, job.id, slot)

        async def failed_and_noticed():
            assert [r["status"] for r in executions(db, job.id)] == ["failed"]
            assert [n[1] for n in notices(db)] == ["failed", "paused"]

        await assert_eventually(failed_and_noticed, timeout=90)
        assert await lost_and_late(db, database_url, client, task_queue, gaps) == 2
        queued = notices(db)
        assert [(n[0], n[1]) for n in queued] == [
            ("NoticeWebhook", event) for event in ("failed", "late", "lost", "paused")
        ]
        # Neither the URL (its token) nor the secret is in an outbox row.
        assert not [n for n in queued if "t0ken" in n[5] or channels.secret in n[5]]

        # The doomed relay's POSTs reach the receiver, which holds them unanswered; the
        # relay is killed with them on the wire: none is marked sent.
        doomed = subprocess.Popen(
            [sys.executable, "-c", RELAY_PROCESS, database_url], cwd=ROOT, env=os.environ
        )
        try:

            async def all_on_the_wire():
                assert len(receiver.raw) == 4, receiver.raw

            await assert_eventually(all_on_the_wire, timeout=60)
        finally:
            doomed.send_signal(signal.SIGKILL)
            doomed.wait(timeout=30)
        receiver.gate.set()
        assert [(n[2], n[4]) for n in notices(db)] == [(False, "doomed")] * 4

        # Its lease runs out (moved to now rather than waited for); a relay delivers all.
        db.execute("UPDATE outbox_messages SET next_attempt_at = now() WHERE claimed_by = 'doomed'")
        smtp = SmtpConfig(host="127.0.0.1", port=9, sender="jobs@example.test")
        async with (
            AsyncConnectionPool(database_url, min_size=1, max_size=2, open=False) as pool,
            Relay(pool, RelayConfig(smtp=smtp), holder="survivor") as relay,
        ):
            assert (await relay.drain(max_seconds=3600)).delivered == 4
        assert [(n[2], n[3]) for n in notices(db)] == [(True, False)] * 4

    # Each id twice on the wire, each notice processed exactly once, every signature good.
    assert sorted(Counter(receiver.raw).values()) == [2, 2, 2, 2]
    assert len(receiver.raw) == 8 and len(set(receiver.raw)) == 4 and receiver.rejected == 0
    events = {p["data"]["event"]: p for p in receiver.processed.values()}
    assert sorted(events) == ["failed", "late", "lost", "paused"]
    assert {p["data"]["schedule"] for p in events.values()} == {job.id, gaps.id}
    assert events["failed"]["type"] == "slot.failed"
    assert events["failed"]["data"]["slot"] == slot.isoformat().replace("+00:00", "Z")
    assert "chunk_size" in events["failed"]["data"]["detail"]
    assert events["paused"]["data"]["detail"].startswith("auto-paused after 1 ")
    await audited(client, database_url, task_queue, [job], start=slot)


async def test_a_runtime_schedules_failure_reaches_its_tenant_by_email_and_webhook(
    db, database_url, client, task_queue, start_workers, receiver
):
    """A tenant's channels set on the command line; its runtime schedule's failed slot
    (which pauses it, K = 1) gives a failed and a paused notice to each channel: the
    webhook answers 503 at first and is retried with backoff, the emails go over SMTP.
    Follows docs/notices.md's commands (set, show, clear)."""
    receiver.gate.set()
    receiver.unavailable = 2
    bad = cli(database_url, "notify", "set", "acme", "--webhook", "ftp://x/?token=t0ken")
    assert bad.returncode == 2 and "t0ken" not in one_error_line(bad)
    done = cli(database_url, "notify", "set", "acme", "--webhook", receiver.url,
               "--email", "ops@acme.test")  # fmt: skip
    assert done.returncode == 0, done.stderr
    port = receiver.port
    line = done.stdout.strip()
    assert line.startswith(
        f"acme: webhook http://127.0.0.1:{port}/..., email ops@acme.test; secret whsec_"
    ), line
    receiver.secret = line.rpartition("secret ")[2]
    shown = cli(database_url, "notify", "show", "acme")
    assert shown.stdout.strip().endswith("secret hidden (show --secret prints it)")
    assert "t0ken" not in shown.stdout

    start_workers(1)
    runtime.fresh_ids(db)
    sid = await runtime.failing_weekly(db, database_url, NOW, pause_after=1)
    async with runtime.dispatcher(database_url, client, task_queue, batches=False) as d:
        await runtime.tick_all(d, NOW)
        await runtime.settled(db, 1)
    assert sorted((n[0], n[1]) for n in notices(db)) == [
        ("NoticeEmail", "failed"),
        ("NoticeEmail", "paused"),
        ("NoticeWebhook", "failed"),
        ("NoticeWebhook", "paused"),
    ]

    sink = MailSink(free_port()).start()
    try:
        smtp = SmtpConfig(host=sink.host, port=sink.port, sender="jobs@example.test")
        config = RelayConfig(smtp=smtp, backoff_base_seconds=0.1, backoff_max_seconds=0.5)
        async with (
            AsyncConnectionPool(database_url, min_size=1, max_size=2, open=False) as pool,
            Relay(pool, config) as relay,
        ):

            async def all_delivered():
                await relay.run_batch()
                assert [(n[2], n[3]) for n in notices(db)] == [(True, False)] * 4

            await assert_eventually(all_delivered, timeout=60, interval=0.2)
        subjects = sorted(str(m["Subject"]) for m in sink.messages)
        assert {str(m["To"]) for m in sink.messages} == {"ops@acme.test"}
    finally:
        sink.stop()
    assert subjects == [
        f"rt-{sid}: the slot of 2026-11-30T13:00:00Z failed",
        f"rt-{sid}: the slot of 2026-11-30T13:00:00Z failed, and its schedule was paused "
        "(pause_after_failures)",
    ]
    attempts = db.execute(
        "SELECT sum(attempts) FROM outbox_messages WHERE type = 'NoticeWebhook'"
    ).fetchone()[0]
    assert attempts == 4 and receiver.rejected == 0  # two 503s, retried
    assert sorted(p["type"] for p in receiver.processed.values()) == ["slot.failed", "slot.paused"]
    assert {p["data"]["schedule"] for p in receiver.processed.values()} == {f"rt-{sid}"}

    cleared = cli(database_url, "notify", "clear", "acme")
    assert cleared.stdout.strip() == "acme: no more notices"
    with pytest.raises(ScheduleNotFoundError, match=r"^tenant 'acme' has no notice channels$"):
        await tenants.notices(database_url, "acme")
    await runtime.audit_clean(
        database_url, client, task_queue, NOW, NOW + timedelta(minutes=1), late=runtime.LATE
    )


async def test_a_batchs_failed_slot_queues_its_notices_in_the_batchs_transaction(db, database_url):
    """A runtime kind run in batches: the slot that fails alone (its customer moved to
    another tenant) queues its failed and paused notices with its failure; the others,
    completed, queue none. (The batch activity is run directly: no Temporal run, so the
    audit has nothing to judge; test_runtime_tenancy does the same.)"""
    runtime.fresh_ids(db)
    minute = datetime.now(UTC).replace(second=0, microsecond=0)
    cids = [customer(db, f"t{i}", "UTC") for i in range(2)]
    once = {"next_fire_at": minute, "timing_since": minute, "end_at": minute}
    ids = [
        runtime.insert_schedule(db, tenant=f"t{i}", name="weekly", kind="weekly-report",
                        cron="* * * * *", timezone="UTC", params={"customer_id": cid}, **once)
        for i, cid in enumerate(cids)
    ]  # fmt: skip
    for i in range(2):
        await tenants.set_notices(database_url, f"t{i}", emails=[f"ops@t{i}.test"])
    await tenants.set_pause_after_failures(database_url, ids[1], 1, by="test")
    db.execute("UPDATE customers SET tenant = 'initech' WHERE id = %s", (cids[1],))
    done = await weekly_batch(db, database_url, ids, minute)
    assert (done.completed, done.failed) == (1, 1)
    queued = db.execute(
        "SELECT payload->>'schedule', payload->>'event', payload->>'to', payload->>'slot'"
        " FROM outbox_messages WHERE type = 'NoticeEmail' ORDER BY 2"
    ).fetchall()
    when = minute.isoformat().replace("+00:00", "Z")
    assert queued == [
        (f"rt-{ids[1]}", "failed", "ops@t1.test", when),
        (f"rt-{ids[1]}", "paused", "ops@t1.test", when),
    ]
