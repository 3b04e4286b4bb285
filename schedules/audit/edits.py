"""The slots timing edits stranded (`schedules.edits`, `edited_slots`): what each decided
is judged, since no timing's coverage reaches them (the new timing had them due before it
took effect).

- dropped by the edit, no row: `dropped_by_edit`, until a backfill runs it;
- kept by the edit (started then), no row once --settle has passed since: `lost`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.rows import dict_row

from core.sql import queries
from schedules.audit.finding import Finding
from schedules.audit.history import Window
from schedules.catalog.times import utc_text

_Q = queries("schedules.sql", "audit")


async def edit_findings(
    conninfo: str, job_names: Sequence[str], window: Window, timeout: float
) -> list[Finding]:
    """The findings about the stranded slots of `job_names` in the window."""
    async with await psycopg.AsyncConnection.connect(
        conninfo, connect_timeout=max(2, int(timeout)), row_factory=dict_row
    ) as conn:
        await conn.set_read_only(True)
        cur = await conn.execute(
            _Q["edited_in"], {"jobs": list(job_names), "from": window.start, "to": window.end}
        )
        rows = await cur.fetchall()
    return [f for row in rows if (f := _judged(row, window)) is not None]


def _judged(row: dict[str, Any], window: Window) -> Finding | None:
    if row["status"] is not None:
        return None  # it has run (or runs): its row speaks for it
    witnesses = {
        "edited_at": utc_text(row["edited_at"]),
        "was_due_at": utc_text(row["was_due_at"]),
        "due_at": utc_text(row["due_at"]) if row["due_at"] else None,
    }
    edit = f"the timing edit of {utc_text(row['edited_at'])}"
    if row["outcome"] == "dropped":
        detail = f"dropped by {edit}: {row['reason']}"
        return Finding("dropped_by_edit", row["job_name"], row["scheduled_at"], detail, witnesses)
    if row["edited_at"] <= window.now - window.settle:
        detail = f"kept by {edit} and started then, but no ledger row: {row['reason']}"
        return Finding("lost", row["job_name"], row["scheduled_at"], detail, witnesses)
    return None
