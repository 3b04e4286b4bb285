"""Secrets never leave in text: `core.redact`, the log filter, the quiet library loggers."""

from __future__ import annotations

import io
import json
import logging

import pytest

from core import redact
from jobs.outbox_relay.transports import DeliveryError
from worker.logs import configure_logging
from worker.scrubbing import scrubbed
from worker.settings import register_secrets

WEBHOOK = "https://hooks.example.test/services/T01/B02/xoxb-tok3n?token=s3cr3t-t0ken&team=ops"


@pytest.fixture(autouse=True)
def fresh_registry():
    redact.forget_secrets()
    yield
    redact.forget_secrets()


def test_registered_values_and_their_parts_are_masked_wherever_they_appear():
    register_secrets(
        {
            "DATABASE_URL": "postgresql://app:pa55-w0rd@db.internal/jobs",
            "SMTP_PASSWORD": "smtp-hunter2",
            "WEBHOOK_URL": WEBHOOK,
        }
    )
    echoed = "HTTP 500: POST /services/T01/B02/xoxb-tok3n?token=s3cr3t-t0ken&team=ops HTTP/1.1"
    for text in (
        f"POST {WEBHOOK} -> 500",
        echoed,
        "query was token=s3cr3t-t0ken",
        "auth failed for smtp-hunter2",
        "password pa55-w0rd rejected",
    ):
        clean = redact.scrub(text)
        for secret in ("s3cr3t-t0ken", "xoxb-tok3n", "smtp-hunter2", "pa55-w0rd"):
            assert secret not in clean, (text, clean)
    # Host and database names stay readable: only the password of DATABASE_URL is secret.
    assert "db.internal/jobs" in redact.scrub(
        "cannot reach postgresql://app:pa55-w0rd@db.internal/jobs"
    )


@pytest.mark.parametrize(
    ("text", "gone"),
    [
        ("connect postgresql://app:unknown-pw@[::1/db failed", "unknown-pw"),
        ('in URI: "mysql://root:p@ss@host/db"', "p@ss"),  # an unencoded @ in a password
        ("GET https://api.example.test/v1/x?api_key=k-123&x=1 failed", "k-123"),
        ("POST /hook?token=t-456 HTTP/1.1", "t-456"),
        ("redirect to http://u:secret-pw@example.test/", "secret-pw"),
    ],
)
def test_unregistered_secrets_are_masked_by_their_shape(text, gone):
    assert gone not in redact.scrub(text)


def test_ordinary_text_is_left_alone():
    for text in ("job 'x': cron: bad", "10 = 5 + 5", "see https://docs.temporal.io/x"):
        assert redact.scrub(text) == text


def test_delivery_errors_are_scrubbed_before_they_are_stored():
    redact.add_url_secrets(WEBHOOK)
    error = DeliveryError(
        "webhook answered HTTP 500: POST /services/T01/B02/xoxb-tok3n?token=s3cr3t-t0ken"
    )
    assert "s3cr3t-t0ken" not in str(error) and "xoxb-tok3n" not in str(error)


def test_an_activity_error_holding_a_secret_is_replaced_keeping_its_type():
    redact.add_secret("db-pa55")
    replaced = scrubbed(RuntimeError("cannot use password db-pa55"))
    assert replaced is not None and "db-pa55" not in str(replaced)
    assert replaced.type == "RuntimeError"
    assert scrubbed(RuntimeError("nothing secret")) is None


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_library_loggers_are_quiet_and_every_record_is_scrubbed(log_format, monkeypatch):
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    redact.add_url_secrets(WEBHOOK)
    configure_logging(log_format, logging.DEBUG)  # even at DEBUG
    try:
        logging.getLogger("httpx").info('HTTP Request: POST %s "HTTP/1.1 200 OK"', WEBHOOK)
        logging.getLogger("aiosmtplib").debug("client: AUTH PLAIN AGFwcABzZWNyZXQ=")
        logging.getLogger("psycopg.pool").warning("error connecting: %s", WEBHOOK)
        try:
            raise ValueError(f"bad answer from {WEBHOOK}")
        except ValueError:
            logging.getLogger("jobs").exception("relay failed", extra={"url": WEBHOOK})
    finally:
        configure_logging("text", logging.INFO)
    out = stream.getvalue()
    assert "HTTP Request" not in out and "AUTH PLAIN" not in out
    assert "error connecting" in out and "relay failed" in out and "bad answer" in out
    for secret in ("s3cr3t-t0ken", "xoxb-tok3n"):
        assert secret not in out
    if log_format == "json":
        assert all(json.loads(line) for line in out.splitlines() if line.startswith("{"))
