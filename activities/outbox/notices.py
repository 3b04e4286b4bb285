"""Notices that reach the owner (issue 40, item 4; docs/notices.md): a failed, auto-paused,
lost or late slot queues one outbox message per channel of the tenant that gets the
schedule's notices, in the transaction that records the event:

- `failed` and `paused`: where the failure is recorded (`record_failure`, a runtime batch's
  failed slot), with the auto-pause it caused;
- `lost` and `late`: where the audit's finding is recorded (`slot_notices`, written by
  `schedules audit --notify`: `schedules.notices`).

A runtime schedule's notices go to its tenant's channels, a catalog job's to those of the
tenant its `notify` names (`notice_channels`, `schedules tenants notify set`). The outbox
key (schedule, slot, event, channel) makes a second write of the same event a no-op. The
relay delivers them: `NoticeEmail` over SMTP, `NoticeWebhook` signed per Standard Webhooks
(`jobs.outbox_relay.notices`).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from psycopg import AsyncConnection

from core.sql import queries

_Q = queries("activities.outbox", "notices")
_RUNTIME = re.compile(r"^rt-([0-9]+)$")

NOTICE_WEBHOOK = "NoticeWebhook"
NOTICE_EMAIL = "NoticeEmail"
NOTICE_TYPES = frozenset({NOTICE_WEBHOOK, NOTICE_EMAIL})
# Each event, as a notice's subject says it.
EVENTS = {
    "failed": "failed",
    "paused": "failed, and its schedule was paused (pause_after_failures)",
    "lost": "was lost: due, and no run of it was recorded",
    "late": "started late",
}
MAX_DETAIL = 500


def slot_text(slot: datetime) -> str:
    """A slot as notices name it: UTC, ISO 8601, `Z`."""
    return slot.astimezone(UTC).isoformat().replace("+00:00", "Z")


async def queue_notices(
    conn: AsyncConnection,
    job_name: str,
    slot: datetime,
    event: str,
    detail: str,
    tenant: str | None = None,
) -> int:
    """In `conn`'s transaction, queue the notices of `event` for (job_name, slot): to a
    runtime schedule's tenant, or to `tenant` (a catalog job's `notify`). How many were
    queued now (0: no channel, or queued before)."""
    runtime = _RUNTIME.match(job_name)
    if runtime is None and tenant is None:
        return 0
    when = slot_text(slot)
    detail = detail[:MAX_DETAIL]
    params = {
        "tenant": tenant,
        "runtime_id": int(runtime[1]) if runtime and tenant is None else None,
        "job": job_name,
        "slot": when,
        "event": event,
        "detail": detail,
        "subject": f"{job_name}: the slot of {when} {EVENTS[event]}",
        "text": (
            f"Schedule {job_name}, slot {when} (UTC): {EVENTS[event]}.\n\n{detail}\n\n"
            "One notice is sent per schedule, slot and event.\n"
        ),
    }
    cur = await conn.execute(_Q["queue"], params)
    return len(await cur.fetchall())


async def failed_in(
    conn: AsyncConnection,
    job_name: str,
    slot: datetime,
    error: str,
    pause_note: str | None,
    tenant: str | None = None,
) -> None:
    """After a slot was recorded failed in `conn`'s transaction (and its schedule paused,
    when `pause_note`): queue its notices."""
    await queue_notices(conn, job_name, slot, "failed", error, tenant)
    if pause_note is not None:
        await queue_notices(conn, job_name, slot, "paused", pause_note, tenant)


async def found_in(
    conn: AsyncConnection,
    job_name: str,
    slot: datetime,
    event: str,
    detail: str,
    tenant: str | None = None,
) -> bool:
    """Record a lost or late slot the audit found (`slot_notices`) and queue its notices,
    in `conn`'s transaction; False when it was recorded before (nothing queued again)."""
    params = {"job": job_name, "slot": slot, "event": event, "detail": detail[:MAX_DETAIL]}
    cur = await conn.execute(_Q["record_found"], params)
    if await cur.fetchone() is None:
        return False
    await queue_notices(conn, job_name, slot, event, detail, tenant)
    return True
