"""An edit never drops a decided slot (issue 36, item 4; docs/calendars.md).

When an edit of a job's timing (a catalog job's sync, a runtime schedule's update or apply)
strands slots (`timing.edits.stranded`: owed by the timing before, due before the edit or
never under the new one), the edit decides each by the job's catch-up policy, as it would
decide runs missed while the server was down: the slots the new timing runs are missed
runs of it (`latest` runs the newest, `all` the newest `max_missed`, `skip` none); the
others are dropped. A slot that already has a ledger row ran, or runs: not stranded.

Each decision is recorded in `edited_slots` (migration 0025) before anything is started,
so `explain` says what the edit did to the slot and `audit` judges it: a slot kept must
run (`lost` otherwise), a slot dropped is a finding (`dropped_by_edit`) until a backfill
runs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from core.sql import queries
from schedules.catalog.times import utc_text
from timing.edits import Strand

_Q = queries("schedules.sql", "edits")
CONNECT_TIMEOUT = 5


@dataclass(frozen=True)
class Decision:
    """What an edit decided for one stranded slot: `run` (the edit starts it) or `dropped`."""

    strand: Strand
    outcome: str
    reason: str


def decide(strands: list[Strand], catchup: str, max_missed: int | None) -> list[Decision]:
    """Each stranded slot's fate under the job's catch-up policy (pure). Slots the new
    timing runs are missed runs of it; a slot sharing a fire time with one kept runs too
    (the same run works every slot of its fire time)."""
    runnable = [s for s in strands if s.due is not None]
    count = {"skip": 0, "latest": 1, "all": max_missed or 0}.get(catchup, 0)
    kept = {s.due for s in runnable[len(runnable) - count :]} if count else set()
    decisions = []
    for s in strands:
        if s.due is None:
            why = "the new timing does not run it"
            decisions.append(Decision(s, "dropped", why))
        elif s.due in kept:
            why = f"the new timing has it due {utc_text(s.due)}, before the edit: run as missed"
            decisions.append(Decision(s, "run", f"{why} (catch-up {catchup})"))
        else:
            policy = "runs no missed time" if catchup == "skip" else f"runs the newest {count}"
            why = f"the new timing has it due {utc_text(s.due)}, before the edit"
            decisions.append(Decision(s, "dropped", f"{why}; catch-up {catchup} {policy}"))
    return decisions


async def decide_edit(
    conn: psycopg.AsyncConnection,
    job_name: str,
    strands: list[Strand],
    edited_at: datetime,
    catchup: str,
    max_missed: int | None,
) -> list[Decision]:
    """Decide and record (on `conn`, in its transaction) the slots an edit of `job_name` at
    `edited_at` strands (`timing.edits.stranded`); those with a ledger row are not
    stranded. The caller starts the slots decided `run`."""
    if not strands:
        return []
    cur = await conn.execute(_Q["ledgered"], {"job": job_name, "slots": [s.slot for s in strands]})
    ledgered = {_first(row) for row in await cur.fetchall()}
    decisions = decide([s for s in strands if s.slot not in ledgered], catchup, max_missed)
    if decisions:
        await conn.execute(
            _Q["record"],
            {
                "job": job_name,
                "edited_at": edited_at,
                "slots": [d.strand.slot for d in decisions],
                "was_due": [d.strand.was_due for d in decisions],
                "due": [d.strand.due for d in decisions],
                "outcomes": [d.outcome for d in decisions],
                "reasons": [d.reason for d in decisions],
            },
        )
    return decisions


def _first(row: Any) -> Any:
    """A row's first column, whatever the connection's row factory (tuples or dicts)."""
    return next(iter(row.values())) if isinstance(row, dict) else row[0]
