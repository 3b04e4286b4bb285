"""Recording the pauses that `pause`, `resume` and `sync` make (`schedules.pauses`), and the
backfills `backfill` asks for (`schedules.backfills`), for the audit. Best-effort: the pause
or backfill is Temporal's, and a database out of reach must not undo or fail it; the command
says so on stderr and the audit reports the stretch honestly.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Awaitable, Callable

import psycopg

from core import redact
from core.errors import first_line
from schedules.cli.context import Context

logger = logging.getLogger(__name__)


async def best_effort(
    ctx: Context,
    what: str,
    job_id: str,
    record: Callable[[str], Awaitable[None]],
    unseen: str = "cannot excuse its fire times",
) -> None:
    """Run `record(database_url)`; on a database error warn in one line, saying what the
    audit then `unseen`, and carry on."""
    try:
        await record(ctx.settings.database_url.get_secret_value())
    except (psycopg.Error, OSError) as exc:
        logger.debug("%s record failed", what, exc_info=True)
        warn_unrecorded(what, job_id, redact.scrub(first_line(exc)), unseen)


def warn_unrecorded(what: str, job_id: str, reason: str, unseen: str) -> None:
    """The one line on stderr saying the `what` of `job_id` is not recorded, and why."""
    print(
        f"warning: the {what} of {job_id} is not recorded in PostgreSQL ({reason}); "
        f"`schedules audit` {unseen}",
        file=sys.stderr,
    )
