"""A record of the backfills this project's tooling asks for, for `schedules audit`.

The server keeps nothing of a backfill it drops (a request lost among schedule updates that
arrive together, a start whose workflow id another run holds), and the audit judges the
fire times of a job's current timing only: a backfill of slots before that timing took
effect, dropped, was invisible. `schedules backfill` records each request in
`backfill_requests`, with the slots it asks for, before sending it; the audit expects a
ledger row for each of them, whatever the timing.

Recording is best-effort, as for pauses (schedules/cli/pauses.py): the backfill is
Temporal's, and a database out of reach must not stop it; the command says so on stderr.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import psycopg

from core.sql import queries

_Q = queries("schedules.sql", "backfills")
CONNECT_TIMEOUT = 5


async def record_backfill(
    conninfo: str,
    job_id: str,
    start: datetime,
    end: datetime,
    slots: Sequence[datetime],
    *,
    at: datetime,
) -> None:
    """Record that a backfill of `job_id` over `[start, end)` asks at `at` for `slots`."""
    params = {"job": job_id, "at": at, "start": start, "end": end, "slots": list(slots)}
    async with await psycopg.AsyncConnection.connect(
        conninfo, connect_timeout=CONNECT_TIMEOUT, autocommit=True
    ) as conn:
        await conn.execute(_Q["record_backfill"], params)
