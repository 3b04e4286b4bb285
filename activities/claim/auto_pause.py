"""Pause on repeated failure (issue 40, item 3), in the transaction that records a failed
slot: a schedule with `pause_after_failures = K` whose K latest finished slots since its
last resume all failed is paused, its note naming those slots and the last error. A resume
starts the count again (only slots finished after it count), and a completed slot ends a
run of failures.

- A runtime schedule: its row is paused (`paused_by = 'auto'`) with a change-log row.
- A catalog job (K from its catalog entry, in the run's input): its Temporal schedule is
  paused with the note, and the pause recorded in `schedule_pauses` (`paused_by = 'auto'`)
  for the audit, `explain` and `check`; the server is asked before the transaction
  commits, so a failure recorded is never left without its pause (an error rolls both
  back, and the activity's retry does both again). `schedules resume` lifts it.
"""

from __future__ import annotations

import re

from psycopg import AsyncConnection
from temporalio import activity
from temporalio.exceptions import ApplicationError

from core.sql import queries

_Q = queries("activities.claim", "auto_pause")
_RUNTIME = re.compile(r"^rt-([0-9]+)$")


async def auto_pause_in(
    conn: AsyncConnection, job_name: str, catalog_limit: int | None = None
) -> str | None:
    """After a slot of `job_name` was recorded failed in `conn`'s transaction: pause its
    schedule if that failure is its K-th in a row (a runtime schedule's K is on its row; a
    catalog job's is `catalog_limit`). The pause's note when it paused it, else None."""
    runtime = _RUNTIME.match(job_name)
    if runtime is not None:
        params = {"id": int(runtime[1]), "job": job_name}
        cur = await conn.execute(_Q["auto_pause_runtime"], params)
        row = await cur.fetchone()
        return row[1] if row is not None else None
    if catalog_limit is None:
        return None
    cur = await conn.execute(_Q["catalog_streak"], {"job": job_name, "k": catalog_limit})
    if (row := await cur.fetchone()) is None:
        return None
    note = row[0]
    await conn.execute(_Q["record_auto_pause"], {"job": job_name, "note": note})
    await pause_schedule(job_name, note)
    return note


async def pause_schedule(schedule_id: str, note: str) -> None:
    """Pause the catalog job's Temporal schedule with `note`; raise (retryable) unless the
    server shows it paused (a schedule patch can be lost: `schedules.server.actions`)."""
    handle = activity.client().get_schedule_handle(schedule_id)
    await handle.pause(note=note)
    described = await handle.describe()
    if not described.schedule.state.paused:
        raise ApplicationError(f"the pause of schedule {schedule_id!r} did not take effect")
