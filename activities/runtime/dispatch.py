"""The dispatcher of runtime schedules: one tick of one shard (issue 21, part 4).

Runtime schedules live in PostgreSQL (`runtime_schedules`), not as one Temporal schedule
each. A few catalog jobs (`runtime-dispatch-0..N-1`, every minute, overlap SKIP; N a live
setting, `activities.runtime.shards`) each run one tick of their shard, whatever the number of
runtime schedules:

1. **Decide**, in ONE transaction per bounded batch: the shard's due rows
   (`next_fire_at <= now`, `FOR UPDATE SKIP LOCKED`: a second dispatcher on the shard takes
   other rows or none), each one's slots by its catch-up policy (`decide_slots`), the
   intents to run them (`runtime_dispatch_intents`, ON CONFLICT DO NOTHING), ledger rows
   `skipped` for the missed slots the policy does not run, and the next fire time.
2. **Start**, after the commit: the workflow of every intent not yet started, this tick's
   and any a dispatcher left behind when it died between its commit and its starts, under
   its deterministic id. Temporal refuses a second start of one id (reported as already
   started), so a start repeated by two dispatchers or after a crash is harmless; the
   ledger row and its fencing token keep one effect per slot even if a slot's workflow
   ran twice. The intent is then marked started.

The decision needs no fence: the row lock orders concurrent dispatchers, and the next fire
time moves in the same transaction as the intents, so a slot is decided once.

`dispatch_tick(pool, client, shard, now)` takes its clock as a parameter (the dispatcher
job passes its own scheduled time): never a run before its time, and tests drive it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from psycopg.rows import class_row
from psycopg_pool import AsyncConnectionPool
from temporalio.client import Client

from activities.claim.heartbeat import heartbeating
from activities.common.models import Origin
from activities.runtime.models import BATCH_SLOTS, batch_workflow_id, slot_workflow_id
from activities.runtime.shards import buckets, shards_at
from activities.runtime.start import Intent, attributes_registered, start_intent
from activities.runtime.tenant_limits import Budget, TenantDefaults, budgets, count_starts
from core.sql import queries
from timing import TICK, Timing
from timing.business import BusinessCalendar, CalendarRule

_Q = queries("activities.runtime", "dispatch")

# A slot dispatched within this of its time runs as `scheduled`; later, it was missed
# (the dispatcher was down) and its schedule's catch-up policy decides.
GRACE = timedelta(minutes=2)
# Missed slots a policy looks at, at most, per schedule and tick (older ones are beyond
# every policy's reach, as for catalog jobs: `activities.catchup.missed.MAX_CONSIDERED`).
MAX_CONSIDERED = 1000
# Rows locked and decided per transaction: a herd's 15,000 rows in 2 rounds a shard, each
# a few set-based statements, its batches started as soon as it commits.
DECIDE_BATCH = 2000
START_CONCURRENCY = 64  # workflow starts in flight at once, per process


@dataclass(frozen=True)
class Slots:
    """One schedule's decision at a tick: slots to run (with their origin), missed slots
    recorded skipped (with the reason), the next slot to dispatch, and when each slot a
    business calendar moved is due (its fire time; the others are due at their own)."""

    run: list[tuple[datetime, Origin]]
    skip: list[tuple[datetime, str]]
    next_fire_at: datetime | None
    due: Mapping[datetime, datetime] = field(default_factory=dict)


def decide_slots(
    timing: Timing,
    catchup: str,
    next_fire_at: datetime,
    timing_since: datetime | None,
    now: datetime,
    max_missed: int | None = None,
) -> Slots:
    """Pure policy: which of the fire times in [next_fire_at, now] run (never one after
    `now`, never one before `timing_since`: an edit does not invent missed runs).

    The newest due slot is on time when `now` is within `GRACE` of it; the others were
    missed. As for catalog jobs (`activities.catchup.missed.decide`): `skip` runs only an on-time
    slot; `latest` runs the newest once; `all` runs the `max_missed` newest missed ones,
    oldest first, and the on-time slot besides. Every due slot not run is recorded skipped
    with the reason."""
    low = max(next_fire_at, timing_since) if timing_since is not None else next_fire_at
    due = timing.fire_times(low, now + TICK, limit=MAX_CONSIDERED, newest=True)
    following = timing.next_after(now)
    if not due:
        return Slots([], [], following)
    newest = due[-1]
    on_time = now - newest <= GRACE

    def origin(slot: datetime) -> Origin:
        return "scheduled" if on_time and slot == newest else "catch-up"

    if catchup == "skip":
        run = [newest] if on_time else []
        why = "missed: catch-up policy 'skip' runs no missed time"
    elif catchup == "latest":
        run = [newest]
        why = f"missed: catch-up policy 'latest' ran only {newest:%Y-%m-%dT%H:%M:%SZ}"
    else:
        keep = max(max_missed or 1, 1)
        missed = [slot for slot in due if not (on_time and slot == newest)]
        run = missed[-keep:] + ([newest] if on_time else [])
        why = f"missed: beyond catch-up policy 'all' (max_missed {keep})"
    ran = set(run)
    decided = Slots(
        [(slot, origin(slot)) for slot in run],
        [(slot, why) for slot in due if slot not in ran],
        following,
    )
    return (
        decided if timing.calendar is None else _as_slots(timing, decided, low, timing_since, now)
    )


def _as_slots(
    timing: Timing, decided: Slots, low: datetime, since: datetime | None, now: datetime
) -> Slots:
    """A schedule with a business calendar: each decided fire time as the slots its
    calendar puts there, unadjusted (the intents' and the ledger's keys), none from before
    its timing took effect, each due at that fire time: a `following` slot runs once its
    fire time has come, a `preceding` one before its own time, both under their own."""
    slots: dict[datetime, list[datetime]] = {}
    for fire in timing.fires(low, now + TICK, limit=MAX_CONSIDERED, newest=True):
        if since is None or fire.slot >= since:
            slots.setdefault(fire.at, []).append(fire.slot)
    return Slots(
        [(slot, origin) for at, origin in decided.run for slot in slots.get(at, [])],
        [(slot, why) for at, why in decided.skip for slot in slots.get(at, [])],
        decided.next_fire_at,
        {slot: at for at, _ in decided.run for slot in slots.get(at, []) if slot != at},
    )


def within(slots: Slots, budget: Budget) -> Slots | None:
    """The slots a tenant's budget lets run (None: none, the schedule is deferred), taken
    from the budget. A catch-up of more slots than the budget runs its oldest (whole fire
    times), and the schedule's next slot is the fire time after the last one run: the rest
    are decided at a later tick, under the policy."""
    left = budget.left()
    if len(slots.run) <= left:
        budget.taken += len(slots.run)
        return slots
    cut = left

    def at(i: int) -> datetime:
        return slots.due.get(slots.run[i][0], slots.run[i][0])

    while cut > 0 and at(cut - 1) == at(left):
        cut -= 1
    if cut == 0:
        return None
    budget.taken += cut
    return Slots(slots.run[:cut], slots.skip, at(cut - 1) + TICK, slots.due)


@lru_cache(maxsize=1024)
def calendar_rule(definition: str | None, on_holiday: str | None) -> CalendarRule | None:
    """A runtime schedule's business calendar from its row (the definition as JSON text)."""
    if definition is None:
        return None
    return CalendarRule(
        calendar=BusinessCalendar.model_validate_json(definition), on_holiday=on_holiday or "skip"
    )


@dataclass
class TickCounts:
    """What one tick did, for the dispatcher's result and the bench."""

    due: int = 0  # schedules decided
    intents: int = 0  # new intents recorded
    skipped: int = 0  # missed slots recorded skipped
    deferred: int = 0  # schedules whose due slot a tenant limit held back
    started: int = 0  # workflows started
    already_started: int = 0  # starts Temporal refused: started before
    statements: int = 0  # SQL statements run

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


class Decisions:
    """One decide transaction's decisions, as the arrays its three set-based statements
    take: intents (a batch kind's slots grouped into batches of BATCH_SLOTS), skipped
    slots, next fire times."""

    def __init__(self, batch_kinds: frozenset[str]) -> None:
        self.batch_kinds = batch_kinds
        self.intents: dict[str, list] = {
            "ids": [], "slots": [], "workflow_ids": [], "origins": [], "dues": []
        }  # fmt: skip
        self.skipped: dict[str, list] = {"ids": [], "slots": [], "workflow_ids": [], "reasons": []}
        self.advance: dict[str, list] = {"ids": [], "nexts": []}
        self.deferred: dict[str, list] = {"ids": [], "reasons": []}
        self.tracked: set[int] = set()  # schedules whose slots count in flight
        self.batches: dict[str, list[tuple[int, datetime, Origin, datetime | None]]] = {}

    def add(self, sid: int, kind: str, slots: Slots, *, tracked: bool = False) -> None:
        if tracked:
            self.tracked.add(sid)
        for slot, origin in slots.run:
            due = slots.due.get(slot)
            if kind in self.batch_kinds:
                self.batches.setdefault(kind, []).append((sid, slot, origin, due))
            else:
                self._intent(sid, slot, origin, slot_workflow_id(sid, slot), due)
        for slot, reason in slots.skip:
            for key, value in zip(
                self.skipped, (sid, slot, slot_workflow_id(sid, slot), reason), strict=True
            ):
                self.skipped[key].append(value)
        self.advance["ids"].append(sid)
        self.advance["nexts"].append(slots.next_fire_at)

    def defer(self, sid: int, reason: str) -> None:
        """A schedule whose due slot its tenant's limit holds back: left due."""
        self.deferred["ids"].append(sid)
        self.deferred["reasons"].append(reason)

    def _intent(
        self, sid: int, slot: datetime, origin: Origin, workflow_id: str, due: datetime | None
    ) -> None:
        for key, value in zip(self.intents, (sid, slot, workflow_id, origin, due), strict=True):
            self.intents[key].append(value)

    async def record(self, conn: Any, now: datetime, counts: TickCounts) -> None:
        """The three statements, in the decide transaction."""
        for members in self.batches.values():
            for i in range(0, len(members), BATCH_SLOTS):
                chunk = members[i : i + BATCH_SLOTS]
                batch_id = batch_workflow_id(*chunk[0][:2])
                for sid, slot, origin, due in chunk:
                    self._intent(sid, slot, origin, batch_id, due)
        if self.intents["ids"]:
            tracked = [sid in self.tracked for sid in self.intents["ids"]]
            cur = await conn.execute(
                _Q["record_intents"], self.intents | {"now": now, "tracked": tracked}
            )
            counts.intents += len(await cur.fetchall())
            counts.statements += 1
        if self.skipped["ids"]:
            await conn.execute(_Q["record_skipped"], self.skipped)
            counts.skipped += len(self.skipped["ids"])
            counts.statements += 1
        if self.advance["ids"]:
            await conn.execute(_Q["advance"], self.advance)
            counts.statements += 1
        if self.deferred["ids"]:
            await conn.execute(_Q["defer"], self.deferred | {"now": now})
            counts.deferred += len(self.deferred["ids"])
            counts.statements += 1


@dataclass
class Dispatcher:
    """One shard's ticks. `batch_kinds`: the kinds whose slots run in batches."""

    pool: AsyncConnectionPool
    client: Client
    task_queue: str
    batch_kinds: frozenset[str] = frozenset()
    heartbeat: Callable[..., None] = lambda *_: None
    # Test-only pause point between a decision's commit and its starts (the chunk gate:
    # a fault test kills the dispatcher there); a no-op in production.
    after_decide: Callable[[], Awaitable[None]] | None = None
    # Starts in flight at once: give the dispatchers of one process the same gate, so
    # ticks of several shards at once do not flood the server (default: this one's own).
    start_gate: asyncio.Semaphore = field(
        default_factory=lambda: asyncio.Semaphore(START_CONCURRENCY)
    )
    # Rows locked and decided per transaction (a test makes it small to see one batch).
    decide_batch: int = DECIDE_BATCH
    # The operator's default limits per tenant (a tenant's own override them).
    limits: TenantDefaults = field(default_factory=TenantDefaults)
    _attributes: bool | None = field(default=None, init=False)

    async def tick(self, shard: int, now: datetime) -> TickCounts:
        """Decide every due slot of `shard` as of `now`, then start every unstarted intent."""
        counts = TickCounts()
        held: set[str] = set()  # tenants at their limit: left to the next tick
        async with self.pool.connection() as conn:  # its buckets under the count at `now`
            mine = buckets(shard, await shards_at(conn, now))
        counts.statements += 1
        if not mine:  # a shard beyond the count in force: it ends at once
            return counts
        await self.start_unstarted(mine, now, counts)
        while True:
            decided = await self.decide(mine, now, counts, held)
            if decided and self.after_decide is not None:
                await self.after_decide()
            await self.start_unstarted(mine, now, counts)
            if decided < self.decide_batch:
                return counts

    async def decide(
        self, mine: list[int], now: datetime, counts: TickCounts, held: set[str] | None = None
    ) -> int:
        """One transaction: lock up to `decide_batch` due rows of the buckets `mine`, fairly
        across tenants (but those in `held`), record their decisions; a slot past its
        tenant's limit is deferred, and its tenant added to `held`."""
        held = set() if held is None else held
        async with self.pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                _Q["due"],
                {"buckets": mine, "now": now, "limit": self.decide_batch, "held": sorted(held)},
            )
            rows = await cur.fetchall()
            counts.statements += 1
            limited = await budgets(conn, (row[1] for row in rows), self.limits, now)
            decisions = Decisions(self.batch_kinds)
            decided: dict[tuple, Slots] = {}  # a herd shares a few timings: each decided once
            for sid, tenant, kind, *key in rows:
                if (slots := decided.get(tuple(key))) is None:
                    cron, zone, catchup, max_missed, start_at, end_at, nxt, since, *days = key
                    timing = Timing(
                        cron=cron,
                        timezone=zone,
                        start_at=start_at,
                        end_at=end_at,
                        calendar=calendar_rule(*days),
                    )
                    slots = decided[tuple(key)] = decide_slots(
                        timing, catchup, nxt, since, now, max_missed
                    )
                if (budget := limited.get(tenant)) is None:
                    decisions.add(sid, kind, slots)
                elif (allowed := within(slots, budget)) is None:
                    decisions.defer(sid, budget.reason())
                    held.add(tenant)
                else:
                    decisions.add(sid, kind, allowed, tracked=budget.tracked)
            await decisions.record(conn, now, counts)
            await count_starts(conn, limited, now)
            held.update(t for t, b in limited.items() if b.left() == 0)
        counts.due += len(rows)
        self.heartbeat(counts.as_dict())
        return len(rows)

    async def start_unstarted(self, mine: list[int], now: datetime, counts: TickCounts) -> None:
        """Start the workflow of every intent of `mine` due by `now` not marked started."""
        while True:
            async with (
                self.pool.connection() as conn,
                conn.cursor(row_factory=class_row(Intent)) as cur,
            ):
                await cur.execute(_Q["unstarted"], {"buckets": mine, "now": now, "limit": 2000})
                found = await cur.fetchall()
            counts.statements += 1
            if not found:
                return
            by_workflow: dict[str, list[Intent]] = {}
            for intent in found:
                by_workflow.setdefault(intent.workflow_id, []).append(intent)
            await self.start_all(by_workflow, counts)
            async with self.pool.connection() as conn:
                await conn.execute(_Q["mark_started"], {"workflow_ids": list(by_workflow)})
            counts.statements += 1
            self.heartbeat(counts.as_dict())
            if len(found) < 2000:
                return

    async def start_all(self, by_workflow: Mapping[str, list[Intent]], counts: TickCounts) -> None:
        attributes = await self.attributes_registered()

        async def one(workflow_id: str, members: list[Intent]) -> None:
            async with self.start_gate:
                started = await self.start(workflow_id, members[0], attributes)
            if started:
                counts.started += 1
            else:
                counts.already_started += 1

        # A round of starts is long on a busy server, and waits for the process's gate
        # while other shards start theirs: the tick heartbeats all along.
        await heartbeating(
            asyncio.gather(*(one(wid, members) for wid, members in by_workflow.items()))
        )

    async def start(self, workflow_id: str, first: Intent, attributes: bool) -> bool:
        """Start one intent's workflow; False when Temporal says it was started before."""
        return await start_intent(self.client, self.task_queue, workflow_id, first, attributes)

    async def attributes_registered(self) -> bool:
        """Whether the namespace has the runtime search attributes (asked once per
        process once they are; runs start without them until `schedules sync` adds them)."""
        if not self._attributes:
            self._attributes = await attributes_registered(self.client)
        return self._attributes
