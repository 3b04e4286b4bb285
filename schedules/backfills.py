"""Backfills: the runs of a past range of a job's fire times, and their record for the audit.

`backfill` does what `python -m schedules backfill` does, callable from Python: it lists the
job's own fire times in the range (under its DST rules), records the request in PostgreSQL,
then asks Temporal for the runs in one of two ways. When the server's schedule fires exactly
those times, one Temporal backfill (overlap BUFFER_ALL: one run after another). Otherwise
(a DST-compiled spec covers a bounded range of years; a catalog change not synced yet) one
trigger per fire time, each with the nominal time the job's own rules give it.

The server keeps nothing of a backfill it drops (a request lost among schedule updates that
arrive together, a start whose workflow id another run holds), and the audit judges the
fire times of a job's current timing only: a backfill of slots before that timing took
effect, dropped, was invisible. So each request is recorded in `backfill_requests`, with the
slots it asks for, before it is sent; the audit expects a ledger row for each of them,
whatever the timing. Recording is best-effort, as for pauses: the backfill is Temporal's,
and a database out of reach must not stop it (`Backfilled.unrecorded` says why it is not
recorded).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import psycopg
from temporalio.client import Client

from core import redact
from core.errors import first_line
from core.sql import execute_once, queries
from schedules.catalog.model import JobSpec
from schedules.catalog.times import utc_text
from schedules.server.actions import backfill as temporal_backfill
from schedules.server.actions import trigger_each
from schedules.server.retry import Retry
from schedules.server.state import translated
from schedules.server.times import server_times

logger = logging.getLogger(__name__)

_Q = queries("schedules.sql", "backfills")
CONNECT_TIMEOUT = 5
# Temporal buffers the starts of a trigger burst; past about a thousand it drops them.
BACKFILL_HARD_LIMIT = 1000


@dataclass(frozen=True)
class Backfilled:
    """What `backfill` asked Temporal for."""

    times: list[datetime]  # the job's fire times in the range: one run each, oldest first
    whole: bool  # one Temporal backfill; False: one trigger per fire time
    unrecorded: str | None = None  # why the request is not in PostgreSQL (None: it is)

    @property
    def how(self) -> str:
        if self.whole:
            return "Temporal backfill"
        return "one trigger per fire time (the server's schedule fires other times here)"


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
    await execute_once(conninfo, _Q["record_backfill"], params, CONNECT_TIMEOUT)


def backfill_times(job: JobSpec, start: datetime, end: datetime, now: datetime) -> list[datetime]:
    """The fire times of `job` a backfill of `[start, end)` runs.

    Raises:
        ValueError: the range is empty, reaches past `now` (Temporal would start a future
            time at once, and the slot would then count as done), or holds more than
            `BACKFILL_HARD_LIMIT` fire times.
    """
    span = f"[{utc_text(start)}, {utc_text(end)})"
    if start >= end:
        raise ValueError(f"backfill of {job.id!r}: start is not before end in {span}")
    if end > now:
        raise ValueError(
            f"backfill of {job.id!r}: end {utc_text(end)} is after now ({utc_text(now)}): "
            "backfill runs past fire times only"
        )
    times = job.timing.fire_times(start, end, limit=BACKFILL_HARD_LIMIT + 1)
    if len(times) > BACKFILL_HARD_LIMIT:
        raise ValueError(
            f"backfill of {job.id!r} over {span} would start more than "
            f"{BACKFILL_HARD_LIMIT} runs, the most one backfill may start: split the range"
        )
    return times


async def backfill(
    client: Client,
    job: JobSpec,
    start: datetime,
    end: datetime,
    *,
    conninfo: str | None = None,
    now: datetime | None = None,
    retry: Retry | None = None,
) -> Backfilled:
    """Start a run of each of `job`'s fire times in `[start, end)`, one after another.

    The request is recorded in PostgreSQL first when `conninfo` is given (best-effort, see
    the module). Returns once the first run started (a Temporal backfill) or every trigger
    was taken up; `wait_for_run` follows the runs. A slot that already completed is a
    recorded no-op.

    Raises:
        ValueError: a bad range (`backfill_times`).
        OperationError: the job has no schedule, or Temporal did not start the runs.
        TemporalUnreachableError: Temporal did not answer within `retry`'s time.
    """
    now = now or datetime.now(UTC)
    times = backfill_times(job, start, end, now)
    if not times:
        return Backfilled(times=[], whole=True)
    served = await translated(
        client,
        retry,
        job.id,
        "listing the fire times",
        lambda: server_times(client, job.id, start, end),
    )
    unrecorded = None
    if conninfo is not None:
        try:
            await record_backfill(conninfo, job.id, start, end, times, at=now)
        except (psycopg.Error, OSError) as exc:
            logger.debug("backfill record failed", exc_info=True)
            unrecorded = redact.scrub(first_line(exc))
    if served == times:
        await temporal_backfill(client, job.id, start, end, first=times[0], retry=retry)
    else:
        await trigger_each(client, job.id, times, retry=retry)
    return Backfilled(times=times, whole=served == times, unrecorded=unrecorded)
