"""Limits per tenant on the dispatch of runtime schedules (issue 40, item 1).

A tenant may have at most N runs in flight and start at most M slots a minute: operator
defaults (`RUNTIME_TENANT_MAX_IN_FLIGHT`, `RUNTIME_TENANT_MAX_PER_MINUTE`; unset: none),
overridden per tenant (`runtime_tenant_limits`, `schedules tenants limits set`). The
dispatcher reads them in its decide transaction (`activities/runtime/dispatch.py`): a due slot past
a limit is *deferred*, its schedule left due (its next fire time unchanged, since when and
why recorded on the row), and decided again at a later tick, under its catch-up policy.

Race-safe across dispatchers of different shards (one tenant's schedules are in every
shard): the decide transaction locks each limited tenant's `runtime_tenant_limits` row
(inserted first for a tenant the defaults alone limit) before it counts, so a second
dispatcher counting the same tenant waits until the first's intents are committed.

*In flight*: the tenant's intents not settled. An intent of a limited tenant is recorded
unsettled; the decide transaction settles those whose ledger row is terminal. *Started this
minute*: a count on the tenant's row for the tick's minute.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core.sql import queries

_Q = queries("activities.runtime", "dispatch")


@dataclass(frozen=True)
class TenantDefaults:
    """The operator's default limits (None: no limit)."""

    max_in_flight: int | None = None
    max_per_minute: int | None = None

    @classmethod
    def of(cls, settings: Any) -> TenantDefaults:
        return cls(settings.runtime_tenant_max_in_flight, settings.runtime_tenant_max_per_minute)


@dataclass
class Budget:
    """What one limited tenant may still start in this decide transaction."""

    tenant: str
    max_in_flight: int | None
    max_per_minute: int | None
    in_flight: int = 0  # before this transaction
    started: int = 0  # this minute, before this transaction
    taken: int = 0  # slots decided in this transaction

    @property
    def tracked(self) -> bool:
        """Whether its intents are counted in flight until their run finishes."""
        return self.max_in_flight is not None

    def left(self) -> int:
        room = []
        if self.max_in_flight is not None:
            room.append(self.max_in_flight - self.in_flight - self.taken)
        if self.max_per_minute is not None:
            room.append(self.max_per_minute - self.started - self.taken)
        return max(min(room), 0)

    def reason(self) -> str:
        """Which limit holds it: `2 in flight (limit 2)`."""
        flying = self.in_flight + self.taken
        if self.max_in_flight is not None and flying >= self.max_in_flight:
            return f"{flying} in flight (limit {self.max_in_flight})"
        return f"{self.started + self.taken} started this minute (limit {self.max_per_minute})"


def minute_of(now: datetime) -> datetime:
    return now.replace(second=0, microsecond=0)


async def budgets(
    conn: Any, tenants: Iterable[str], defaults: TenantDefaults, now: datetime
) -> dict[str, Budget]:
    """The budget of each limited tenant among `tenants`, its row locked for the caller's
    transaction (a tenant with no limit has none: it is not held back, nor counted)."""
    wanted = sorted(set(tenants))
    cur = await conn.execute(_Q["tenant_limits"], {"tenants": wanted})
    own = {tenant: (flight, minute) for tenant, flight, minute in await cur.fetchall()}
    limited = [
        t
        for t in wanted
        if _limit(own.get(t, (None, None))[0], defaults.max_in_flight) is not None
        or _limit(own.get(t, (None, None))[1], defaults.max_per_minute) is not None
    ]
    if not limited:
        return {}
    if len(own) < len(limited):
        await conn.execute(_Q["tenant_rows"], {"tenants": limited})
    minute = minute_of(now)
    cur = await conn.execute(_Q["lock_tenants"], {"tenants": limited, "minute": minute})
    found = {
        tenant: Budget(
            tenant,
            _limit(flight, defaults.max_in_flight),
            _limit(per_minute, defaults.max_per_minute),
            started=started,
        )
        for tenant, flight, per_minute, started in await cur.fetchall()
    }
    tracked = [t for t, b in found.items() if b.tracked]
    if tracked:
        await conn.execute(_Q["settle"], {"tenants": tracked})
        cur = await conn.execute(_Q["in_flight"], {"tenants": tracked})
        for tenant, runs in await cur.fetchall():
            found[tenant].in_flight = runs
    return {t: b for t, b in found.items() if b.max_in_flight or b.max_per_minute}


async def count_starts(conn: Any, found: dict[str, Budget], now: datetime) -> None:
    """Add the slots decided in this transaction to each tenant's count for the minute."""
    taken = [b for b in found.values() if b.taken]
    if taken:
        await conn.execute(
            _Q["count_starts"],
            {
                "tenants": [b.tenant for b in taken],
                "counts": [b.taken for b in taken],
                "minute": minute_of(now),
            },
        )


def _limit(own: int | None, default: int | None) -> int | None:
    return own if own is not None else default
