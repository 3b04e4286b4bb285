"""The dispatch shards follow `RUNTIME_DISPATCH_SHARDS` at sync (issue 40, item 5).

The count in force for a tick is recorded in PostgreSQL (`runtime_dispatch_shards`, read
by each tick: `activities.runtime.shards`); the engine's dispatcher jobs are `runtime-dispatch-0`
to `-(N-1)`. A sync that finds the setting changed keeps the order that leaves no bucket
without a dispatcher at any minute:

1. The catalog runs `keep` dispatchers: the setting, or more while a larger count is in
   force, pending, or was in force less than `SETTLE` ago; sync creates the new ones
   (growing) and leaves the extra ones (shrinking) in place.
2. After its writes, under its lock, the new count is recorded from the second minute
   boundary ahead: the dispatchers it needs exist by then, and no tick has read it yet.
3. A later sync, once the smaller count has been in force for `SETTLE`, prunes the extra
   dispatchers. Until then each of their ticks ends at once (no bucket is theirs).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import psycopg

from activities.runtime.shards import BUCKETS
from core.sql import queries
from schedules.edits import CONNECT_TIMEOUT
from schedules.record import unavailable

_Q = queries("schedules.sql", "shards")

DISPATCHER = "runtime-dispatch-{}"
AHEAD = timedelta(minutes=2)  # a change applies from the minute boundary this far ahead
# A dispatcher beyond the count is pruned once the count has stood this long: every tick
# of the minutes before has started by then (a deleted schedule's run goes on).
SETTLE = timedelta(minutes=2)


@dataclass(frozen=True)
class ShardPlan:
    """What a sync does about the dispatch shards."""

    wanted: int  # RUNTIME_DISPATCH_SHARDS
    keep: int  # dispatchers the catalog runs now
    recorded: int  # the count recorded last (in force or pending)

    @property
    def retired(self) -> frozenset[str]:
        """The engine's dispatcher ids beyond `keep`: a sync prunes their schedules."""
        return frozenset(DISPATCHER.format(i) for i in range(self.keep, BUCKETS))

    @property
    def change(self) -> bool:
        return self.recorded != self.wanted


async def plan_shards(conninfo: str, wanted: int, now: datetime) -> ShardPlan:
    """The plan at `now` for `wanted` shards, from the counts recorded (PostgreSQL out of
    reach: `DatabaseUnavailableError`, nothing changed)."""
    try:
        async with await psycopg.AsyncConnection.connect(
            conninfo, connect_timeout=CONNECT_TIMEOUT
        ) as conn:
            history = await (await conn.execute(_Q["history"])).fetchall()
    except psycopg.Error as exc:
        raise unavailable(exc, conninfo, "; sync reads the dispatch shards there") from None
    since = now - SETTLE
    standing = [shards for start, shards in history if start <= since][-1:]
    later = [shards for start, shards in history if start > since]
    return ShardPlan(wanted, max(wanted, *standing, *later), history[-1][1])


async def record_shards(conninfo: str, plan: ShardPlan, now: datetime) -> datetime | None:
    """Record the wanted count from the second minute boundary after `now` (None: it is
    already the count recorded last)."""
    if not plan.change:
        return None
    from_tick = now.replace(second=0, microsecond=0) + AHEAD
    try:
        async with await psycopg.AsyncConnection.connect(
            conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT
        ) as conn:
            await conn.execute(_Q["record"], {"from_tick": from_tick, "shards": plan.wanted})
    except psycopg.Error as exc:
        why = f"; the dispatch shards stay {plan.recorded} (run sync again)"
        raise unavailable(exc, conninfo, why) from None
    return from_tick


def shards_line(plan: ShardPlan, from_tick: datetime | None, dry_run: bool) -> str:
    """What the sync did about the dispatch shards, for its report."""
    if plan.change and from_tick is not None:
        line = f"dispatch shards: {plan.recorded} -> {plan.wanted} from {from_tick:%H:%M}Z"
    elif plan.change:
        line = f"dispatch shards: {plan.recorded} -> {plan.wanted} (not recorded: dry run)"
        return line if dry_run else line.replace("dry run", "sync did not finish")
    else:
        line = f"dispatch shards: {plan.wanted}"
    if plan.keep > plan.wanted:
        line += (
            f"; runtime-dispatch-{plan.wanted}..{plan.keep - 1} stay until the count has "
            f"stood {SETTLE.seconds // 60} minutes (their ticks end at once): run sync again "
            "then to remove them"
        )
    return line
