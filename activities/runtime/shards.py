"""Dispatch shards, a live setting (issue 40, item 5): which rows a dispatcher takes.

A runtime schedule's row sits in one of `BUCKETS` buckets (`runtime_schedules.shard`,
id % 16, fixed at insert). When N shards are in force (N divides 16), the dispatcher of
shard i takes the buckets b with b % N = i: every bucket belongs to exactly one shard, and
a dispatcher whose index is N or more has none (its tick ends at once).

N is read by tick (`runtime_dispatch_shards`, migration 0033): the count in force at the
tick's scheduled time, which every dispatcher ticking that minute reads alike, however late
its run. A change is recorded from a minute ahead (`schedules.sync.shards`), so no tick
sees it change under it. The buckets only split the work: the decide transaction's row
locks (`FOR UPDATE SKIP LOCKED`, the due re-check) keep one decision per slot even when
two dispatchers' buckets meet.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from core.sql import queries

_Q = queries("activities.runtime", "dispatch")

BUCKETS = 16
SHARD_COUNTS = (1, 2, 4, 8, 16)  # the counts that divide the buckets evenly
DEFAULT_SHARDS = 4


def buckets(shard: int, shards: int) -> list[int]:
    """The buckets of `shard` when `shards` are in force (none for an index beyond them)."""
    return [b for b in range(BUCKETS) if b % shards == shard] if shard < shards else []


async def shards_at(conn: Any, now: datetime) -> int:
    """The number of dispatch shards in force for the tick scheduled at `now`."""
    row = await (await conn.execute(_Q["shards_at"], {"now": now})).fetchone()
    return DEFAULT_SHARDS if row is None else row[0]
