"""Release waiting runs promptly: when an upstream slot settles, signal the runs that wait
on its job (docs/dependencies.md).

The ledger's trigger (migration 0021) notifies `upstream_settled` with the job's name
when one of its slots settles and some run waits on it. Each worker listens on one
connection of its own and signals those runs (`activities.dependencies.upstream.signal_waiting`); the
run checks again at once. It is an optimisation: a notification lost while no worker
listens (a restart, a lost connection) only leaves the run to its next poll, which every
waiting run has. Several workers signal the same run: it checks once per signal it sees,
and a check is a few statements.
"""

from __future__ import annotations

import asyncio
import logging

import psycopg
from psycopg import AsyncConnection
from temporalio.client import Client
from temporalio.service import RPCError

from activities.common.dependency_models import UPSTREAM_SETTLED_CHANNEL
from activities.dependencies.upstream import signal_waiting
from core import redact
from core.errors import first_line

logger = logging.getLogger(__name__)
RETRY_SECONDS = 5.0


async def release_waiters(conninfo: str, client: Client, retry: float = RETRY_SECONDS) -> None:
    """Listen and signal until cancelled; reconnect after `retry` seconds on a lost
    connection or an unreachable Temporal."""
    while True:
        try:
            await _listen(conninfo, client)
        except (psycopg.Error, OSError, RPCError, RuntimeError) as exc:
            logger.warning(
                "upstream release listener: %s; again in %ss", redact.scrub(first_line(exc)), retry
            )
            await asyncio.sleep(retry)


async def _listen(conninfo: str, client: Client) -> None:
    # Two connections: the listening one is busy while it waits for notifications.
    async with (
        await AsyncConnection.connect(conninfo, autocommit=True) as listening,
        await AsyncConnection.connect(conninfo, autocommit=True) as reading,
    ):
        await listening.execute(f"LISTEN {UPSTREAM_SETTLED_CHANNEL}")
        async for note in listening.notifies():
            await signal_waiting(reading, client, [note.payload])
