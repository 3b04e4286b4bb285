"""The slots a sync's timing edits strand: decided and recorded before the writes, the kept
ones started after them.

`schedules.edits` decides (by each job's catch-up policy) and records. Recording comes
first, so PostgreSQL out of reach stops the sync before it changes anything (a rerun finds
the same strands; once the new timing is written, none is found again). A record whose
write then fails is harmless: the old timing still runs the slot, whose row then speaks for
it. A catalog job's kept slots are started by a backfill of their new fire time, overlap
BUFFER_ALL, as `schedules backfill` starts them: the run works every slot of that fire
time, each under its own ledger row (a slot that already completed is a no-op).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import psycopg
from temporalio.client import Client

from schedules.edits import CONNECT_TIMEOUT, decide_edit
from schedules.record import unavailable
from schedules.server.actions import backfill
from schedules.sync.plan import Target
from schedules.sync.report import SyncReport
from timing.edits import stranded

_SECOND = timedelta(seconds=1)


async def decide_stranded(
    conninfo: str, report: SyncReport, targets: dict[str, Target], edited_at: datetime
) -> None:
    """For each job whose timing the sync changes, decide and record the slots the edit at
    `edited_at` strands (`Change.edited`). PostgreSQL is asked only when there are some."""
    for change in report.changes:
        if change.before is None or change.job_id not in targets:
            continue
        job = targets[change.job_id].job
        strands = stranded(change.before, job.timing, edited_at)
        if not strands:
            continue
        try:
            async with await psycopg.AsyncConnection.connect(
                conninfo, connect_timeout=CONNECT_TIMEOUT
            ) as conn:
                change.edited = await decide_edit(
                    conn, job.id, strands, edited_at, job.catchup, job.max_missed
                )
        except psycopg.Error as exc:
            why = f"; {job.id}'s edit strands {len(strands)} slot(s) and must record them first"
            raise unavailable(exc, conninfo, why) from None


async def start_kept(client: Client, report: SyncReport) -> None:
    """Start the slots the sync's edits kept: a backfill of each one's new fire time."""
    for change in report.changes:
        for due in sorted({d.strand.due for d in change.edited if d.outcome == "run"}):
            assert due is not None
            await backfill(client, change.job_id, due, due + _SECOND)
