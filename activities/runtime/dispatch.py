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
   ran twice. The intent is then marked started. The starts pass the process's gate,
   fair across tenants (`activities.runtime.start_gate`), a tick's batch runs first.

The decision needs no fence: the row lock orders concurrent dispatchers, and the next fire
time moves in the same transaction as the intents, so a slot is decided once.

`dispatch_tick(pool, client, shard, now)` takes its clock as a parameter (the dispatcher
job passes its own scheduled time): never a run before its time, and tests drive it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache

from psycopg.rows import class_row
from psycopg_pool import AsyncConnectionPool
from temporalio.client import Client

from activities.claim.heartbeat import heartbeating
from activities.common.models import Origin
from activities.runtime.dispatch_decisions import Decisions, Slots
from activities.runtime.models import BATCH_PREFIX
from activities.runtime.shards import buckets, shards_at
from activities.runtime.start import Intent, attributes_registered, start_intent
from activities.runtime.start_gate import StartGate
from activities.runtime.tenant_limits import Budget, TenantDefaults, budgets, count_starts
from activities.runtime.tick_counts import TickCounts
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
    # Starts in flight at once, fairly across tenants (`activities.runtime.start_gate`): give the
    # dispatchers of one process the same gate, so ticks of several shards at once do not
    # flood the server (default: this one's own).
    start_gate: StartGate = field(default_factory=StartGate)
    # Rows locked and decided per transaction (a test makes it small to see one batch).
    decide_batch: int = DECIDE_BATCH
    # The operator's default limits per tenant (a tenant's own override them).
    limits: TenantDefaults = field(default_factory=TenantDefaults)
    _attributes: bool | None = field(default=None, init=False)

    async def tick(self, shard: int, now: datetime) -> TickCounts:
        """Decide every due slot of `shard` as of `now`, then start every unstarted intent."""
        counts = TickCounts()
        await self._tick(shard, now, counts)
        counts.tick_ms = counts.elapsed_ms()
        return counts

    async def _tick(self, shard: int, now: datetime, counts: TickCounts) -> None:
        held: set[str] = set()  # tenants at their limit: left to the next tick
        with counts.timed("shards_ms"):
            async with self.pool.connection() as conn:  # its buckets under the count at `now`
                mine = buckets(shard, await shards_at(conn, now))
        counts.statements += 1
        if not mine:  # a shard beyond the count in force: it ends at once
            return
        await self.start_unstarted(mine, now, counts)
        while True:
            with counts.timed("decide_ms"):
                decided = await self.decide(mine, now, counts, held)
            if decided and self.after_decide is not None:
                await self.after_decide()
            await self.start_unstarted(mine, now, counts)
            if decided < self.decide_batch:
                return

    async def decide(
        self, mine: list[int], now: datetime, counts: TickCounts, held: set[str] | None = None
    ) -> int:
        """One transaction: lock up to `decide_batch` due rows of the buckets `mine`, fairly
        across tenants (but those in `held`), record their decisions; a slot past its
        tenant's limit is deferred, and its tenant added to `held`."""
        held = set() if held is None else held
        async with self.pool.connection() as conn, conn.transaction():
            with counts.timed("due_ms"):
                cur = await conn.execute(
                    _Q["due"],
                    {"buckets": mine, "now": now, "limit": self.decide_batch, "held": sorted(held)},
                )
                rows = await cur.fetchall()
            counts.statements += 1
            with counts.timed("limits_ms"):
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
            with counts.timed("limits_ms"):
                await count_starts(conn, limited, now)
            held.update(t for t, b in limited.items() if b.left() == 0)
        counts.due += len(rows)
        counts.rounds += 1
        self.heartbeat(counts.as_dict())
        return len(rows)

    async def start_unstarted(self, mine: list[int], now: datetime, counts: TickCounts) -> None:
        """Start the workflow of every intent of `mine` due by `now` not marked started."""
        while True:
            with counts.timed("unstarted_ms"):
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
            with counts.timed("unstarted_ms"):
                async with self.pool.connection() as conn:
                    await conn.execute(_Q["mark_started"], {"workflow_ids": list(by_workflow)})
            counts.statements += 1
            self.heartbeat(counts.as_dict())
            if len(found) < 2000:
                return

    async def start_all(self, by_workflow: Mapping[str, list[Intent]], counts: TickCounts) -> None:
        attributes = await self.attributes_registered()
        began = time.monotonic()
        took = {"batch_start_ms": 0, "slot_start_ms": 0}

        async def one(workflow_id: str, members: list[Intent]) -> None:
            batch = workflow_id.startswith(BATCH_PREFIX)
            # A batch is its own key (its slots are many tenants'), a run its tenant's.
            async with self.start_gate.place(workflow_id if batch else members[0].tenant):
                counts.gate_wait_ms = max(counts.gate_wait_ms, counts.elapsed_ms(began))
                started = await self.start(workflow_id, members[0], attributes)
            kind = "batch_start_ms" if batch else "slot_start_ms"
            took[kind] = max(took[kind], counts.elapsed_ms(began))
            if batch:
                counts.batches_started_ms = counts.elapsed_ms()
            if started:
                counts.started += 1
            else:
                counts.already_started += 1

        # Batch runs first: each is the slots of many tenants. A round of starts is long on
        # a busy server, and waits for the process's gate while other shards start
        # theirs: the tick heartbeats all along.
        ordered = sorted(by_workflow.items(), key=lambda item: not item[0].startswith(BATCH_PREFIX))
        await heartbeating(asyncio.gather(*(one(wid, members) for wid, members in ordered)))
        for kind, ms in took.items():
            setattr(counts, kind, getattr(counts, kind) + ms)

    async def start(self, workflow_id: str, first: Intent, attributes: bool) -> bool:
        """Start one intent's workflow; False when Temporal says it was started before."""
        return await start_intent(self.client, self.task_queue, workflow_id, first, attributes)

    async def attributes_registered(self) -> bool:
        """Whether the namespace has the runtime search attributes (asked once per
        process once they are; runs start without them until `schedules sync` adds them)."""
        if not self._attributes:
            self._attributes = await attributes_registered(self.client)
        return self._attributes
