"""A record of the pauses this project's tooling makes, for `schedules audit`.

Temporal keeps no history of a schedule's pauses, so the audit could not tell a fire time
skipped on purpose from one lost. `schedules pause` / `resume` and `sync` (when it applies
a catalog's `paused = true`) record each pause in `schedule_pauses`: [paused_at,
resumed_at). The interval is taken wide, never narrow: `paused_at` is read before the
pause is sent, `resumed_at` after the server shows it lifted, so a fire time the server
skipped is always inside it (one it still fired inside it has its row, which is fine).

Recording is best-effort (schedules/cli/pauses.py): the pause itself is Temporal's, and a database that cannot be
reached must not undo or fail it (sync runs where PostgreSQL may be out of reach). The
command says so on stderr; the audit then reports that stretch honestly (`inconclusive`
while the pause holds, `lost` once lifted, unless a later run recorded the missed times).
Pauses made in the Temporal UI are not recorded (docs/operating.md, Auditing the history).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from core.sql import execute_once, queries
from schedules.catalog.times import utc_text

_Q = queries("schedules.sql", "pauses")
CONNECT_TIMEOUT = 5


async def record_pause(
    conninfo: str,
    job_id: str,
    at: datetime,
    *,
    by: str,
    note: str | None = None,
    who: str | None = None,
) -> None:
    """Record that `job_id`'s schedule is paused from `at` (`by`: 'pause' or 'sync'; `who`:
    the operator who asked, for `explain` and `next`)."""
    params = {"job": job_id, "at": at, "by": by, "note": note, "who": who}
    await _execute(conninfo, "record_pause", params)


async def pause_in_force(conninfo: str, job_id: str) -> dict[str, Any] | None:
    """`job_id`'s recorded pause still in force (`paused_at`, `paused_by`, `requested_by`,
    `note`), or None."""
    async with await psycopg.AsyncConnection.connect(
        conninfo, connect_timeout=CONNECT_TIMEOUT, autocommit=True, row_factory=dict_row
    ) as conn:
        cur = await conn.execute(_Q["pause_in_force"], {"job": job_id})
        return await cur.fetchone()


def paused_by_text(recorded: dict[str, Any] | None, *, catalog: bool = False) -> str:
    """Who paused a job, for a sentence `paused by ...`: from its recorded pause in force
    (`pause_in_force`); with none recorded, the catalog if it pauses the job (`catalog`),
    else a tool that records none (the Temporal UI, `temporal schedule toggle`)."""
    if recorded is not None and recorded["paused_by"] == "auto":
        return (
            f"the engine at {utc_text(recorded['paused_at'])} after repeated failures "
            "(`pause_after_failures`)"
        )
    if recorded is not None and recorded["paused_by"] == "pause":
        who = recorded["requested_by"] or "an operator"
        return f"{who} with `schedules pause` at {utc_text(recorded['paused_at'])}"
    if recorded is not None or catalog:
        return "the catalog's `paused = true`"
    return "someone in the Temporal UI or CLI, who is not recorded"


async def record_resume(conninfo: str, job_id: str, at: datetime) -> None:
    """Record that `job_id`'s pause in force, if one is recorded, ended at `at`."""
    await _execute(conninfo, "record_resume", {"job": job_id, "at": at})


async def _execute(conninfo: str, name: str, params: dict[str, Any]) -> None:
    await execute_once(conninfo, _Q[name], params, CONNECT_TIMEOUT)


def paused_by_sync(jobs: Iterable[Any], report: Any) -> list[str]:
    """The jobs a sync's report shows it paused: created paused by the catalog, or updated
    to add the catalog's pause."""
    paused = {job.id for job in jobs if job.paused}
    return [
        c.job_id
        for c in report.changes
        if c.job_id in paused
        and (
            c.action == "create" or (c.action == "update" and "paused (on the server)" in c.fields)
        )
    ]
