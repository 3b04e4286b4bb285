"""Notices without servers: the signature against an independent implementation of
Standard Webhooks (the `standardwebhooks` package), and the one-line refusals of bad
channels and a bad catalog `notify`."""

from __future__ import annotations

import base64
import time

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from core import webhook_signing
from core.errors import InvalidScheduleError
from schedules.catalog.model import default_catalog
from schedules.tenants.notices import NoticeChannels, checked_email, checked_webhook


def test_a_signature_verifies_with_the_standard_webhooks_package():
    secret = webhook_signing.new_secret()
    assert secret.startswith("whsec_") and len(base64.b64decode(secret[6:])) == 32
    body = b'{"type":"slot.failed","data":{"schedule":"rt-1"}}'
    now = int(time.time())
    headers = webhook_signing.headers(secret, "3f0c6a1e", now, body)
    assert Webhook(secret).verify(body, headers) == {
        "type": "slot.failed",
        "data": {"schedule": "rt-1"},
    }
    with pytest.raises(WebhookVerificationError):  # another body
        Webhook(secret).verify(body.replace(b"rt-1", b"rt-2"), headers)
    with pytest.raises(WebhookVerificationError):  # another tenant's secret
        Webhook(webhook_signing.new_secret()).verify(body, headers)


def test_the_signature_matches_the_specs_example():
    # The example of the Standard Webhooks specification (its README, "Signature scheme").
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    body = b'{"test": 2432232314}'
    assert (
        webhook_signing.signature(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body)
        == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    )


@pytest.mark.parametrize(
    "url",
    ["ftp://hooks.example.com/x", "https:///path", "hooks.example.com", "https://h:port/", "x"],
)
def test_a_bad_webhook_is_one_line_without_the_url(url):
    with pytest.raises(InvalidScheduleError) as err:
        checked_webhook(url)
    assert str(err.value).startswith("webhook: must be an http:// or https:// URL")
    assert url not in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("text", ["ops", "ops@localhost", "a@b@c.test", "ops@acme.test\nBcc: x"])
def test_a_bad_email_is_one_line_naming_it(text):
    with pytest.raises(InvalidScheduleError) as err:
        checked_email(text)
    assert str(err.value).startswith("email: not one email address, got ")


def test_a_webhook_is_shown_without_its_path_and_token():
    channels = NoticeChannels("acme", "https://hooks.acme.test:8443/jobs?token=s3cret", [], "x")
    assert channels.webhook_shown == "https://hooks.acme.test:8443/..."


@pytest.mark.parametrize("notify", ["", "  ", "a\nb", "x" * 201])
def test_a_bad_notify_in_the_catalog_names_the_field(notify):
    job = default_catalog()["invoice-reminders"].model_dump()
    with pytest.raises(ValueError) as err:
        type(default_catalog()["invoice-reminders"]).model_validate(job | {"notify": notify})
    assert "notify" in str(err.value) and "must name a tenant" in str(err.value)
