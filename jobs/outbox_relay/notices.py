"""The notices' webhook (`NoticeWebhook` messages, activities/outbox/notices.py): each message as
one JSON POST to its tenant's webhook, signed per Standard Webhooks with the tenant's
secret (`core.webhook_signing`).

URL and secret are read from `notice_channels` at each delivery, never from the message:
the outbox row carries neither. `webhook-id` is the message id on every attempt (the
receiver's de-duplication key); `webhook-timestamp` and the signature are this attempt's.
2xx is delivered; 408, 409, 425, 429, 5xx and network errors are retried with the relay's
backoff; any other status, or a tenant without a webhook any more, is permanent.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
from psycopg_pool import AsyncConnectionPool

from core import redact, webhook_signing
from core.sql import queries
from jobs.outbox_relay.transports import RETRYABLE_4XX, DeliveryError, OutboxMessage

_Q = queries("activities.outbox", "notices")


def notice_body(message: OutboxMessage) -> dict[str, Any]:
    """The JSON a receiver gets: `type` (`slot.failed`, `slot.paused`, `slot.lost`,
    `slot.late`), when the event was recorded, and its data."""
    payload = message.payload
    return {
        "type": f"slot.{payload.get('event')}",
        "timestamp": message.occurred_at.isoformat(),
        "data": {
            name: payload.get(name) for name in ("tenant", "schedule", "slot", "event", "detail")
        },
    }


class NoticeWebhookTransport:
    """Signed POSTs to each tenant's own webhook."""

    name = "notice-webhook"

    def __init__(self, pool: AsyncConnectionPool, connections: int, timeout: float = 10.0):
        self.pool = pool
        self._client = httpx.AsyncClient(
            timeout=timeout,
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
            headers={"User-Agent": "scheduled-jobs-notices"},
            follow_redirects=False,
        )

    def begin_batch(self) -> None:
        pass

    async def _channel(self, message: OutboxMessage) -> tuple[str, str]:
        tenant = message.payload.get("tenant")
        async with self.pool.connection() as conn:
            cur = await conn.execute(_Q["channel"], {"tenant": tenant})
            row = await cur.fetchone()
        if row is None or row[0] is None:
            raise DeliveryError(f"tenant {tenant!r} has no notice webhook now", permanent=True)
        url, secret = row
        redact.add_url_secrets(url)  # a receiver may echo its request line back
        redact.add_secret(secret)  # never sent; scrubbed all the same
        return url, secret

    async def send(self, message: OutboxMessage) -> None:
        url, secret = await self._channel(message)
        body = json.dumps(notice_body(message), separators=(",", ":")).encode()
        headers = webhook_signing.headers(secret, str(message.id), int(time.time()), body)
        headers["content-type"] = "application/json"
        try:
            response = await self._client.post(url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            raise DeliveryError(
                f"notice webhook unavailable: {type(exc).__name__}: "
                f"{redact.scrub(str(exc).replace(url, 'the webhook URL'))}"
            ) from None
        status = response.status_code
        if 200 <= status < 300:
            return
        raise DeliveryError(
            f"notice webhook answered HTTP {status} {response.reason_phrase}",
            permanent=400 <= status < 500 and status not in RETRYABLE_4XX,
        )

    async def close(self) -> None:
        await self._client.aclose()
