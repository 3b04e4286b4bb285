"""The pause and resume commands, and sync, recording their pauses (`schedules.pauses`).

Best-effort: the pause is Temporal's, and a database out of reach must not undo or fail
it; the command says so on stderr and the audit reports the stretch honestly.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import psycopg

from core import redact
from schedules.cli.context import Context
from schedules.pauses import paused_by_sync, record_pause, record_resume
from schedules.server.state import pause, resume

logger = logging.getLogger(__name__)


async def _best_effort(ctx: Context, what: str, job_id: str, record: Any) -> None:
    try:
        await record(ctx.settings.database_url.get_secret_value())
    except (psycopg.Error, OSError) as exc:
        logger.debug("pause record failed", exc_info=True)
        reason = redact.scrub(str(exc).strip().splitlines()[0] if str(exc).strip() else "")
        print(
            f"warning: the {what} of {job_id} is not recorded in PostgreSQL ({reason}); "
            "`schedules audit` cannot excuse its fire times",
            file=sys.stderr,
        )


async def pause_recorded(ctx: Context, job_id: str, note: str) -> None:
    """`schedules pause`: pause the schedule (`schedules.server.state.pause`) and record it."""
    at = datetime.now(UTC)
    await pause(ctx, job_id, note)
    await _best_effort(
        ctx, "pause", job_id, lambda url: record_pause(url, job_id, at, by="pause", note=note)
    )


async def resume_recorded(ctx: Context, job_id: str, note: str) -> None:
    """`schedules resume`: unpause the schedule (`schedules.server.state.resume`) and record it."""
    await resume(ctx, job_id, note)
    at = datetime.now(UTC)
    await _best_effort(ctx, "resume", job_id, lambda url: record_resume(url, job_id, at))


async def record_sync(ctx: Context, jobs: Iterable[Any], report: Any, started: datetime) -> None:
    """Record the pauses a finished sync applied, as of `started` (before its writes)."""
    for job_id in paused_by_sync(jobs, report):
        await _best_effort(
            ctx,
            "pause",
            job_id,
            lambda url, job_id=job_id: record_pause(url, job_id, started, by="sync"),
        )
