"""A schedule's slots decided at a tick (`Slots`), and one decide transaction's decisions
(`activities.runtime.dispatch`), written with a few set-based statements: the intents to run (a
batch kind's slots grouped into batch runs), the missed slots recorded skipped, the
schedules' next fire times, and the schedules a tenant's limit defers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from activities.common.models import Origin
from activities.runtime.models import BATCH_SLOTS, batch_workflow_id, slot_workflow_id
from activities.runtime.tick_counts import TickCounts
from core.sql import queries

_Q = queries("activities.runtime", "dispatch")


@dataclass(frozen=True)
class Slots:
    """One schedule's decision at a tick: slots to run (with their origin), missed slots
    recorded skipped (with the reason), the next slot to dispatch, and when each slot a
    business calendar moved is due (its fire time; the others are due at their own)."""

    run: list[tuple[datetime, Origin]]
    skip: list[tuple[datetime, str]]
    next_fire_at: datetime | None
    due: Mapping[datetime, datetime] = field(default_factory=dict)


class Decisions:
    """A schedule's slots decided at a tick (`Slots`), and one decide transaction's decisions, as the arrays its three set-based statements
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
        with counts.timed("record_ms"):
            await self._record(conn, now, counts)
        if self.deferred["ids"]:
            with counts.timed("defer_ms"):
                await conn.execute(_Q["defer"], self.deferred | {"now": now})
            counts.deferred += len(self.deferred["ids"])
            counts.statements += 1

    async def _record(self, conn: Any, now: datetime, counts: TickCounts) -> None:
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
