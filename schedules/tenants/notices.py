"""Where a tenant's notices go (issue 40, item 4; docs/notices.md): `set_notices`,
`notices`, `clear_notices`; `python -m schedules tenants notify set|show|clear TENANT`.

A tenant has at most one webhook and a few email addresses. Its notices (a failed,
auto-paused, lost or late slot of one of its runtime schedules, or of a catalog job whose
`notify` names it) are queued in the outbox and delivered by the relay: email over SMTP,
the webhook signed per Standard Webhooks with the tenant's secret (`whsec_...`, made on
the first `set` and kept until `rotate_secret`). The webhook URL (it may hold a token) and
the secret are never logged; `NoticeChannels.webhook_shown` is the URL without its path.
"""

from __future__ import annotations

import email.errors
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from email.headerregistry import Address
from urllib.parse import urlsplit

import schedules.tenants.store as store
from core import webhook_signing
from core.errors import InvalidScheduleError, ScheduleNotFoundError
from core.sql import queries
from schedules.tenants.limits import checked_tenant
from schedules.tenants.model import checked_by

_Q = queries(__package__, "notices")
MAX_EMAILS = 10
MAX_URL = 2000


@dataclass(frozen=True)
class NoticeChannels:
    tenant: str
    webhook_url: str | None
    emails: list[str]
    secret: str
    updated_at: datetime | None = None
    updated_by: str = ""
    new_secret: bool = False  # made (or rotated) by this call: give it to the receiver

    @property
    def webhook_shown(self) -> str | None:
        """The webhook as it may be shown: scheme and host, path and query hidden."""
        if self.webhook_url is None:
            return None
        parts = urlsplit(self.webhook_url)
        return f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}/..."


def checked_webhook(url: str | None) -> str | None:
    """An http(s) URL with a host, or one `InvalidScheduleError` line (the URL not shown:
    it may hold a token)."""
    if url is None or _is_webhook(url):
        return url
    raise InvalidScheduleError(
        f"webhook: must be an http:// or https:// URL with a host, at most {MAX_URL} "
        "characters (the value is not shown: it may hold a token)"
    )


def _is_webhook(url: str) -> bool:
    if not url.isprintable() or len(url) > MAX_URL:
        return False
    try:
        parts = urlsplit(url)
        _ = parts.port  # a port that is not a number raises
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def checked_email(text: str) -> str:
    """One email address, or one `InvalidScheduleError` line naming it."""
    try:
        address = Address(addr_spec=text)
    except (ValueError, IndexError, TypeError, email.errors.MessageError):
        address = None
    if address is None or not address.username or "." not in address.domain:
        raise InvalidScheduleError(f"email: not one email address, got {text[:200]!r}")
    return address.addr_spec


async def set_notices(
    db: store.Database,
    tenant: str,
    *,
    webhook_url: str | None = None,
    emails: Sequence[str] = (),
    rotate_secret: bool = False,
    by: str = "",
) -> NoticeChannels:
    """Send `tenant`'s notices to `webhook_url` and `emails` (both replaced); validated
    first, nothing written on bad input (`InvalidScheduleError`, naming the field)."""
    checked = list(dict.fromkeys(checked_email(e) for e in emails))
    if len(checked) > MAX_EMAILS:
        raise InvalidScheduleError(f"email: at most {MAX_EMAILS} addresses, got {len(checked)}")
    params = {
        "tenant": checked_tenant(tenant),
        "webhook_url": checked_webhook(webhook_url),
        "emails": checked,
        "secret": webhook_signing.new_secret(),
        "rotate": rotate_secret,
        "by": checked_by(by),
    }
    if params["webhook_url"] is None and not checked:
        raise InvalidScheduleError("notify: give a webhook, an email address or both")
    async with store.transaction(db) as conn:
        row = await (await conn.execute(_Q["set_channels"], params)).fetchone()
    return NoticeChannels(**row)


async def notices(db: store.Database, tenant: str) -> NoticeChannels:
    """`tenant`'s channels; `ScheduleNotFoundError` when it has none."""
    async with store.transaction(db) as conn:
        cur = await conn.execute(_Q["channels"], {"tenant": checked_tenant(tenant)})
        row = await cur.fetchone()
    if row is None:
        raise ScheduleNotFoundError(f"tenant {tenant!r} has no notice channels")
    return NoticeChannels(**row)


async def clear_notices(db: store.Database, tenant: str) -> bool:
    """Send `tenant` no more notices (those queued already fail permanently when their
    webhook is gone; their emails still go). False when it had no channels."""
    async with store.transaction(db) as conn:
        cur = await conn.execute(_Q["clear_channels"], {"tenant": checked_tenant(tenant)})
        return await cur.fetchone() is not None
