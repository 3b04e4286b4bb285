"""The slots a sync's timing edits strand: decided, recorded, and the kept ones started.

`schedules.edits` decides (by each job's catch-up policy) and records; here a catalog job's
kept slots are started by a backfill of their new fire time, overlap BUFFER_ALL, as
`schedules backfill` starts them: the run works every slot of that fire time, each under
its own ledger row (a slot that already completed is a no-op).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import psycopg
from temporalio.client import Client

from schedules.edits import CONNECT_TIMEOUT, decide_edit
from schedules.server.actions import backfill
from schedules.sync.plan import Target
from schedules.sync.report import SyncReport
from timing.edits import stranded

_SECOND = timedelta(seconds=1)


async def decide_stranded(
    client: Client,
    conninfo: str,
    report: SyncReport,
    targets: dict[str, Target],
    edited_at: datetime,
) -> None:
    """For each job whose timing the sync changed, decide and record the slots the edit at
    `edited_at` strands (`Change.edited`), then start the ones kept."""
    for change in report.changes:
        if change.before is None or change.job_id not in targets:
            continue
        job = targets[change.job_id].job
        strands = stranded(change.before, job.timing, edited_at)
        if not strands:
            continue  # the usual edit: PostgreSQL is not asked
        async with await psycopg.AsyncConnection.connect(
            conninfo, connect_timeout=CONNECT_TIMEOUT
        ) as conn:
            change.edited = await decide_edit(
                conn, job.id, strands, edited_at, job.catchup, job.max_missed
            )
        for due in sorted({d.strand.due for d in change.edited if d.outcome == "run"}):
            assert due is not None
            await backfill(client, job.id, due, due + _SECOND)
