"""A dispatcher's session (issue 43, item 1): one run of `runtime-dispatch-N` ticks its
shard whenever a slot is due, for hours, instead of one run a minute.

Between ticks it sleeps until the shard's next due time (`queries.sql`, next_due) or a
write wakes it (migration 0036 notifies `runtime_due` at the commit of any write to the
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

from activities.claim.heartbeat import activity_heartbeat, heartbeating
from activities.runtime.dispatch import Dispatcher
from activities.runtime.shards import buckets, shards_at
from activities.runtime.tick_counts import TickCounts
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
        """Tick at `first` (the run's own time), then whenever the shard has a slot due.

        Every later tick's time, and the session's end, are read from PostgreSQL's clock
        (`clock_timestamp()`), never the worker's: a dispatch worker whose clock runs
        ahead neither starts a slot early nor ends its session before the next one begins
        (the clocks table of docs/architecture.md; the chaos suite's `dispatch-skew`)."""
        self.add(await self.dispatcher.tick(self.shard, first))
        last = first
        if self.end <= first:  # one tick (max_seconds 0)
            return self.totals | {"ticks": self.ticks}
        async with Wakeups(self.pool.conninfo, RUNTIME_DUE, **(self.pool.kwargs or {})) as wakeups:
            while True:
                if activity.in_activity() and activity.is_worker_shutdown():
                    raise ApplicationError("worker shutting down: the session goes on elsewhere")
                try:
                    now, due, largest = await self.next_due(last + DEFERRED_RECHECK)
                    if now >= self.end:
                        break
                    if largest is not None and self.shard >= largest:
                        break  # a shard retired (sync prunes its job): nothing to wait for
                    if due is not None and due <= now:
                        self.add(await self.dispatcher.tick(self.shard, now))
                        last = now
                        continue
                    wait = (due - now).total_seconds() if due is not None else math.inf
                    left = (self.end - now).total_seconds()
                except Exception:  # a tick's error never ends the session
                    logger.exception("runtime dispatcher of shard %d: tick failed", self.shard)
                    if _now() >= self.end:  # PostgreSQL away: its clock cannot be read
                        break
                    wait = left = RETRY_SECONDS
                await heartbeating(wakeups.wait_in_activity(min(wait, self.recheck_seconds, left)))
                activity_heartbeat(self.totals)
        return self.totals | {"ticks": self.ticks}

    async def next_due(
        self, deferred_from: datetime
    ) -> tuple[datetime, datetime | None, int | None]:
        """PostgreSQL's time now, when the shard's next slot is due (None: none is), and
        the largest shard count in force or recorded ahead."""
        async with self.pool.connection() as conn:
            cur = await conn.execute(_Q["clock"])
            (now,) = await cur.fetchone()
            mine = buckets(self.shard, await shards_at(conn, now))
            cur = await conn.execute(
                _Q["next_due"], {"buckets": mine, "now": now, "deferred_from": deferred_from}
            )
            row = await cur.fetchone()
        return (now, row[0], row[1]) if row else (now, None, None)


def _now() -> datetime:
    return datetime.now(UTC)
