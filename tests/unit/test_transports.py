"""Rendering and failure classification of the outbox transports, without servers."""

from __future__ import annotations

import email
import email.policy
from datetime import UTC, datetime
from uuid import UUID

import aiosmtplib
import pytest
from pydantic import SecretStr

from jobs.outbox_relay.activities import RelayConfig
from jobs.outbox_relay.transports import (
    DeliveryError,
    OutboxMessage,
    SmtpConfig,
    _smtp_failure,
    render_email,
)
from worker.settings import Settings

CONFIG = SmtpConfig(host="127.0.0.1", port=25, sender="Billing <billing@example.com>")
MESSAGE_ID = UUID("0b3c6c1e-8a39-4f0e-9a57-7c6a3f1d2e4b")
WHEN = datetime(2026, 11, 29, 2, 30, tzinfo=UTC)


def message(payload: dict, type_: str = "InvoiceReminder") -> OutboxMessage:
    return OutboxMessage(MESSAGE_ID, type_, payload, 0, WHEN)


def parsed(raw: bytes) -> email.message.EmailMessage:
    return email.message_from_bytes(raw, policy=email.policy.default)


def test_an_invoice_reminder_is_a_plain_email_keyed_by_the_message_id():
    raw = render_email(
        message({"to": "ann@example.com", "invoice_number": "INV-7", "due_date": "2026-11-01"}),
        CONFIG,
    )
    mail = parsed(raw)
    assert mail["Message-ID"] == f"<{MESSAGE_ID}@example.com>"
    assert mail["To"] == "ann@example.com" and mail["From"] == "Billing <billing@example.com>"
    assert mail["Subject"] == "Payment reminder: invoice INV-7"
    assert mail["Date"] == "Sun, 29 Nov 2026 02:30:00 +0000"  # when written: same every attempt
    assert "INV-7, due on 2026-11-01, is still unpaid" in mail.get_content()
    assert b"\r\n\r\n" in raw and b"\n" not in raw.replace(b"\r\n", b"")


def test_non_ascii_subject_and_text_are_encoded():
    mail = parsed(
        render_email(
            message(
                {"to": "jo@example.com", "subject": "Grüße", "text": "Hällo\n" + "é" * 2000}, "Note"
            ),
            SmtpConfig(
                host="h", port=25, sender="Bïlling <b@example.com>", message_id_domain="m.test"
            ),
        )
    )
    assert mail["Subject"] == "Grüße" and mail["From"] == "Bïlling <b@example.com>"
    assert mail.get_content().replace("\r\n", "\n").startswith("Hällo\n" + "é" * 10)
    assert mail["Message-ID"] == f"<{MESSAGE_ID}@m.test>"


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        ({"invoice_number": "INV-1"}, "needs a non-empty string field 'to', got nothing"),
        ({"to": 42, "invoice_number": "INV-1"}, "field 'to', got int"),
        ({"to": "nobody", "invoice_number": "INV-1"}, "field 'to' is not one email address"),
        ({"to": "a@b.com, c@d.com", "invoice_number": "INV-1"}, "is not one email address"),
        ({"to": "a@b.com\r\nBcc: x@y.com", "invoice_number": "INV-1"}, "is not one email address"),
        ({"to": "a@example.com"}, "field 'invoice_number', got nothing"),
    ],
)
def test_a_malformed_payload_is_a_permanent_error_naming_the_field(payload, error):
    with pytest.raises(DeliveryError) as err:
        render_email(message(payload), CONFIG)
    assert err.value.permanent
    assert str(err.value).startswith("malformed payload: InvoiceReminder")
    assert error in str(err.value)


def test_a_line_break_in_a_header_value_is_refused():
    with pytest.raises(DeliveryError, match="line break in an email header") as err:
        render_email(
            message({"to": "a@example.com", "subject": "hi\nBcc: x@y.com", "text": "t"}, "Note"),
            CONFIG,
        )
    assert err.value.permanent


@pytest.mark.parametrize(
    ("exc", "permanent", "text"),
    [
        (aiosmtplib.SMTPResponseException(550, "mailbox unavailable"), True, "550 mailbox"),
        (aiosmtplib.SMTPResponseException(451, "try again later"), False, "451 try again"),
        (aiosmtplib.SMTPAuthenticationError(535, "bad credentials"), False, "login failed"),
        (
            aiosmtplib.SMTPRecipientsRefused(
                [aiosmtplib.SMTPRecipientRefused(550, "no such user", "a@b.com")]
            ),
            True,
            "refused the recipient: 550",
        ),
        (aiosmtplib.SMTPConnectError("refused"), False, "unavailable: SMTPConnectError"),
        (ConnectionResetError("reset"), False, "unavailable: ConnectionResetError"),
    ],
)
def test_smtp_failures_are_permanent_only_for_5xx_replies(exc, permanent, text):
    failure = _smtp_failure(exc, "mail:25")
    assert failure.permanent is permanent
    assert text in str(failure)


def test_relay_settings_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("WEBHOOK_URL", "https://hooks.example.com/x?token=s3cret")
    monkeypatch.setenv("OUTBOX_EMAIL_TYPES", "InvoiceReminder, Receipt")
    monkeypatch.setenv("SMTP_PASSWORD", "pw")
    monkeypatch.setenv("SMTP_USERNAME", "")
    config = RelayConfig.from_settings(Settings())
    assert config.email_types == frozenset({"InvoiceReminder", "Receipt"})
    assert isinstance(config.webhook.url, SecretStr) and "s3cret" not in repr(config)
    assert config.smtp.username is None and config.smtp.password.get_secret_value() == "pw"
    assert (config.smtp.host, config.smtp.port) == ("127.0.0.1", 8025)  # the local sink


def test_a_bad_webhook_url_is_refused_without_showing_it(monkeypatch):
    from core.errors import SettingsError
    from worker.settings import load_settings

    monkeypatch.setenv("WEBHOOK_URL", "hooks.example.com/x?token=s3cret")
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert "WEBHOOK_URL" in str(err.value) and "s3cret" not in str(err.value)
