"""Standard Webhooks signatures (https://www.standardwebhooks.com): the scheme notices'
webhooks are signed with (docs/notices.md).

A secret is `whsec_` + base64 of 32 random bytes. A call carries `webhook-id` (the outbox
message id: the same on every retry, the receiver's de-duplication key),
`webhook-timestamp` (Unix seconds of this attempt) and `webhook-signature`: `v1,` + base64
of HMAC-SHA256 over `{id}.{timestamp}.{body}` keyed with the secret's decoded bytes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

PREFIX = "whsec_"


def new_secret() -> str:
    """A fresh signing secret, `whsec_...`."""
    return PREFIX + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def signature(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` header value of one call."""
    key = base64.b64decode(secret.removeprefix(PREFIX))
    signed = f"{message_id}.{timestamp}.".encode() + body
    mac = hmac.new(key, signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode("ascii")


def headers(secret: str, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three Standard Webhooks headers of one call."""
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(secret, message_id, timestamp, body),
    }
