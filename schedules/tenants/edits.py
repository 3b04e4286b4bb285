"""A runtime schedule's timing edit never drops a decided slot (`schedules.edits`).

An update or apply that changes a schedule's timing decides the slots it strands (owed by
the timing before, due before the edit or never under the new one), by the schedule's
catch-up policy, in the edit's own transaction: each is recorded in `edited_slots` under
the schedule's ledger name (`rt-<id>`), and each kept one as an intent for the dispatcher
(origin `backfill`, due at its new fire time: its next tick starts it).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import schedules.tenants.store as store
from activities.runtime.models import slot_workflow_id
from schedules.edits import Decision, decide_edit
from schedules.tenants.model import Definition, Schedule
from timing.edits import stranded


async def decide_stranded(
    conn: Any, current: Schedule, new: Definition, now: datetime, by: str
) -> list[Decision]:
    """Decide, record and (the kept ones) hand to the dispatcher the slots that the edit of
    `current` to `new` at `now` strands."""
    strands = stranded(current.timing, new.timing, now)
    if not strands:
        return []
    decisions = await decide_edit(
        conn, current.ledger_name, strands, now, new.catchup, new.max_missed
    )
    kept = [d.strand for d in decisions if d.outcome == "run"]
    if kept:
        await store.all_rows(
            conn,
            "add_intent",
            {
                "schedule_id": current.id,
                "slots": [s.slot for s in kept],
                "workflow_ids": [slot_workflow_id(current.id, s.slot) for s in kept],
                "dues": [s.due if s.due != s.slot else None for s in kept],
                "origin": "backfill",
                "now": now,
                "by": by,
            },
        )
    return decisions
