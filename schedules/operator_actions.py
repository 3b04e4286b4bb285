"""Pause and resume a catalog job's schedule, recorded for the audit: the one sequence that
`python -m schedules pause|resume` and the dashboard's forms both run (issue 39: a page
writes through the CLI's library call, never a second path).

Each checks the schedule is usable, acts on Temporal, then records the pause's interval in
PostgreSQL for `schedules audit` (`schedules.pauses`), taken wide, never narrow: a pause's
start is read before the pause is sent, a resume's after the server lifted it. Recording
is best-effort: the pause is Temporal's, and a database out of reach must not undo or fail
it, so the answer says why it is not recorded (`unrecorded`) and the caller says so.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from datetime import UTC, datetime

import psycopg
from temporalio.client import Client

from core import redact
from core.errors import first_line
from schedules.catalog.compile import intent_note
from schedules.catalog.model import JobSpec
from schedules.pauses import record_pause, record_resume
from schedules.server.actions import pause, resume
from schedules.server.retry import Retry
from schedules.server.state import ServerState, usable_state

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Acted:
    """What a pause or resume did: `changed` (False: a resume of a schedule not paused),
    the schedule's state `before`, and why its record is missing (`unrecorded`, None when
    recorded or nothing to record)."""

    changed: bool
    before: ServerState
    unrecorded: str | None = None


async def pause_job(
    client: Client,
    job: JobSpec,
    note: str,
    *,
    who: str,
    conninfo: str,
    retry: Retry | None = None,
) -> Acted:
    """Pause `job`'s schedule with `note`, recording `who` asked (`explain`, `next`)."""
    before = await usable_state(client, job.id, retry=retry)
    at = datetime.now(UTC)  # before the pause is sent: the recorded interval is never narrow
    await pause(client, job.id, note, retry=retry)
    unrecorded = await _recorded(
        "pause", record_pause(conninfo, job.id, at, by="pause", note=note, who=who)
    )
    return Acted(True, before, unrecorded)


async def resume_job(
    client: Client,
    job: JobSpec,
    note: str | None,
    *,
    conninfo: str,
    retry: Retry | None = None,
) -> Acted:
    """Resume `job`'s schedule if paused; its note goes back to the job's intent unless
    `note` is given."""
    before = await usable_state(client, job.id, retry=retry)
    if not before.paused:
        return Acted(False, before)
    await resume(client, job.id, note or intent_note(job), retry=retry)
    at = datetime.now(UTC)  # after the server lifted it: the recorded interval is never narrow
    return Acted(True, before, await _recorded("resume", record_resume(conninfo, job.id, at)))


async def _recorded(what: str, record: Awaitable[None]) -> str | None:
    try:
        await record
    except (psycopg.Error, OSError) as exc:
        logger.debug("%s record failed", what, exc_info=True)
        return redact.scrub(first_line(exc))
    return None
