"""Lost and late slots, as notices (issue 40, item 4; docs/notices.md).

Nothing happens when a slot is lost (no run recorded it) or late, so nothing records it
then: `schedules audit --notify` finds them and `notify_findings` records each `lost` or
`late` finding in `slot_notices`, with its notices queued in the same transaction
(`activities.outbox.notices.found_in`). A finding recorded before queues nothing again: each
(schedule, slot, event) gets one notice per channel, however often the audit runs.
A runtime schedule's notices go to its tenant's channels; a catalog job's to the tenant its
`notify` names (none: no notice).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import psycopg

from activities.outbox.notices import found_in
from schedules.audit.finding import Finding

EVENTS = ("lost", "late")


async def notify_findings(
    conninfo: str, findings: Iterable[Finding], catalog: Mapping[str, Any], timeout: float = 30
) -> int:
    """Record the `lost` and `late` findings not recorded before and queue their notices;
    `catalog`: the catalog's jobs by id (their `notify`). How many were new."""
    new = 0
    chosen = [f for f in findings if f.kind in EVENTS and f.job and f.slot]
    if not chosen:
        return 0
    connect = psycopg.AsyncConnection.connect(conninfo, connect_timeout=max(2, int(timeout)))
    async with await connect as conn:
        for finding in chosen:
            job = catalog.get(finding.job)
            tenant = getattr(job, "notify", None)
            async with conn.transaction():
                new += await found_in(
                    conn, finding.job, finding.slot, finding.kind, finding.detail, tenant
                )
    return new
