"""The audit's judgements of one runtime schedule's slots (`schedules.audit.runtime`):
`slow` completions, starts decided and never taken up (`unstarted`), and the note on a
schedule whose slots its tenant's limit defers (issue 40)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from schedules.audit.checks import Finding
from schedules.audit.finding import row_witnesses
from schedules.audit.history import Window


def slow(
    job: Any, rows: dict[datetime, Any], due: dict[datetime, datetime], allowance: timedelta
) -> Iterator[Finding]:
    """`slow`: a scheduled slot that completed more than its kind's allowance after it was
    due (its fire time, or where its calendar moved it), or after it was claimed when the
    claim came later (how late the claim was is `late`'s to judge): a lost worker's slot
    that waited for its attempt's timeout, not its heartbeat, is one."""
    for slot, row in rows.items():
        if row.status != "completed" or row.origin != "scheduled" or row.finished_at is None:
            continue
        took = row.finished_at - max(due.get(slot, slot), row.started_at)
        if took > allowance:
            yield Finding(
                "slow",
                job.id,
                slot,
                f"completed {took.total_seconds():.0f}s after it was due (kind {job.kind} "
                f"allows {allowance.total_seconds():.0f}s)",
                row_witnesses(row),
            )


def deferred_note(note: str, job: Any, slots: list[datetime], window: Window) -> str:
    """`deferred by the tenant's limit: 2 in flight (limit 2), waited 40s (2 slots from
    2026-11-30T13:00:00Z)`: slots the dispatcher holds back, within their catch-up policy
    (one past it is recorded skipped when the limit allows)."""
    waited = max((window.now - slots[0]).total_seconds(), 0)
    said = (
        f"deferred by the tenant's limit: {job.deferred_reason or 'at its limit'}, waited "
        f"{waited:.0f}s ({len(slots)} slot(s) from {slots[0]:%Y-%m-%dT%H:%M:%SZ})"
    )
    return f"{note}; {said}" if note else said


def unstarted(intents: list[dict]) -> Iterator[Finding]:
    for i in intents:
        never = i["started_at"] is None
        yield Finding(
            "unstarted_intent",
            f"rt-{i['schedule_id']}",
            i["scheduled_at"],
            (
                "a start decided and never made"
                if never
                else "started, but no run recorded the slot in the ledger"
            )
            + f" ({i['origin']}, decided {i['decided_at']:%Y-%m-%dT%H:%M:%SZ})",
            {"workflow_id": i["workflow_id"], "started_at": i["started_at"]},
        )
