"""A dispatcher's session (issue 43, item 1): one run of `runtime-dispatch-N` ticks its
shard whenever a slot is due, for hours, instead of one run a minute.

Between ticks it sleeps until the shard's next due time (`queries.sql`, next_due) or a
write wakes it (migration 0037 notifies `runtime_due` at the commit of any write to the
runtime schedules, their intents or the shard count; `core.wakeups`), and looks at the
tables again at least every `recheck_seconds` whatever it heard. So a slot starts within
a second or so of its time, a schedule created or resumed for the next minute is seen at
once, and a lost wake-up costs at most the re-check, never a slot: the next tick decides
every slot due by its time, as a late minute tick did.

A tick's error (PostgreSQL or Temporal out of reach) does not end the session: it is
logged and the tick tried again `RETRY_SECONDS` later, as the next minute's run did. The
session ends at its end time (`core.wakeups.session_end`), or at once when its shard is
beyond every shard count in force or recorded ahead (a retired dispatcher, which the next
sync prunes), or raises on a worker shutdown so that its run goes on in another worker
(the activity's retry).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from psycopg_pool import AsyncConnectionPool
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.dispatch import Dispatcher, TickCounts
from activities.heartbeat import activity_heartbeat, heartbeating
from activities.shards import buckets, shards_at
from core.sql import queries
from core.wakeups import RUNTIME_DUE, Wakeups

logger = logging.getLogger(__name__)

_Q = queries(__package__, "queries")

# A schedule a tenant limit deferred is looked at again this long after the last tick.
DEFERRED_RECHECK = timedelta(seconds=5)
# After a tick's error, the session tries again this long after.
RETRY_SECONDS = 5.0


@dataclass
class Session:
    """One shard's ticks until `end`; `run` returns their counts summed."""

    pool: AsyncConnectionPool
    dispatcher: Dispatcher
    shard: int
    end: datetime
    recheck_seconds: float
    totals: dict[str, int] = field(default_factory=dict)
    ticks: int = 0

    def add(self, counts: TickCounts) -> None:
        self.ticks += 1
        for name, value in counts.as_dict().items():
            self.totals[name] = self.totals.get(name, 0) + value

    async def run(self, first: datetime) -> dict[str, int]:
        """Tick at `first` (the run's own time), then whenever the shard has a slot due."""
        self.add(await self.dispatcher.tick(self.shard, first))
        last = first
        if _now() >= self.end:  # one tick (max_seconds 0), or a run too late for a session
            return self.totals | {"ticks": self.ticks}
        async with Wakeups(self.pool.conninfo, RUNTIME_DUE, **(self.pool.kwargs or {})) as wakeups:
            while (now := _now()) < self.end:
                if activity.in_activity() and activity.is_worker_shutdown():
                    raise ApplicationError("worker shutting down: the session goes on elsewhere")
                try:
                    due, largest = await self.next_due(now, last + DEFERRED_RECHECK)
                    if largest is not None and self.shard >= largest:
                        break  # a shard retired (sync prunes its job): nothing to wait for
                    if due is not None and due <= now:
                        self.add(await self.dispatcher.tick(self.shard, now))
                        last = now
                        continue
                    wait = (due - now).total_seconds() if due is not None else math.inf
                except Exception:  # a tick's error never ends the session
                    logger.exception("runtime dispatcher of shard %d: tick failed", self.shard)
                    wait = RETRY_SECONDS
                left = (self.end - now).total_seconds()
                await heartbeating(wakeups.wait_in_activity(min(wait, self.recheck_seconds, left)))
                activity_heartbeat(self.totals)
        return self.totals | {"ticks": self.ticks}

    async def next_due(
        self, now: datetime, deferred_from: datetime
    ) -> tuple[datetime | None, int | None]:
        """When the shard's next slot is due (None: none is), and the largest shard count
        in force or recorded ahead."""
        async with self.pool.connection() as conn:
            mine = buckets(self.shard, await shards_at(conn, now))
            cur = await conn.execute(
                _Q["next_due"], {"buckets": mine, "now": now, "deferred_from": deferred_from}
            )
            row = await cur.fetchone()
        return (row[0], row[1]) if row else (None, None)


def _now() -> datetime:
    return datetime.now(UTC)
