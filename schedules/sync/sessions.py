"""Sync starts the engine's sessions that are not running (issue 43, item 1).

The outbox relay and the runtime dispatchers run as sessions of hours (schedules/engine.toml):
a schedule created by a sync would otherwise first fire hours later (a new dispatcher
shard without a dispatcher meanwhile), and a session that failed or was terminated would
be replaced only at its job's next fire time. So every sync triggers each engine session
job of its catalog that is not paused and has no run going on: its session starts at once
and lasts until the job's next fire time (`core.wakeups.session_end`). A session that
runs goes on untouched. Deploys run `sync`, and so does `make run` at start-up.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

SESSION_KINDS = frozenset({"outbox-relay", "runtime-dispatch"})


async def start_sessions(client: Client, written: Iterable[Any]) -> list[str]:
    """Trigger the schedule of each engine session job of `jobs` (`JobSpec`s) not paused
    and not running; the ids triggered."""
    started = []
    for job in written:
        if job.kind not in SESSION_KINDS or job.paused:
            continue
        handle = client.get_schedule_handle(job.id)
        try:
            described = await handle.describe()
            if described.schedule.state.paused or described.info.running_actions:
                continue
            await handle.trigger()
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:  # deleted meanwhile: nothing to start
                raise
            continue
        started.append(job.id)
    return started
