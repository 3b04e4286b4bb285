"""The runtime schedules API (`schedules.tenants`) as a state machine against a model, on
a real PostgreSQL.

Hypothesis drives random sequences of create (the same definition again, another one under
a taken name, past the tenant's count quota, under its minimum period), update (with the
current version, a stale one, a change of timing or not), pause, resume, delete, trigger,
and the clock moving on across a DST change. After every step each schedule's stored row
(version, paused, note, deleted, timing_since, next_fire_at), its change log and its
recorded intents match the model; `next_fire_at` is the first fire time after
max(now, timing_since) by the minute-walking oracle of `test_fire_times`.

Every example uses tenants of its own, so the one database of the test needs no cleanup.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from core.errors import ConflictError, QuotaError, ScheduleNotFoundError
from schedules import tenants
from schedules.tenants import Quotas
from tests.property.test_fire_times import Cron, Field, plain_fires

pytestmark = pytest.mark.integration

START = datetime(2027, 3, 13, 20, 0, tzinfo=UTC)  # New York springs forward at 07:00Z next day
QUOTAS = Quotas(max_schedules=3, min_period=timedelta(minutes=10))


def cron(minute: str, hour: str, dow: str = "*") -> Cron:
    star = ("*",)
    return Cron(
        second=Field("second", ("0",)),
        minute=Field("minute", (minute,)),
        hour=Field("hour", (hour,)),
        dom=Field("day-of-month", star),
        month=Field("month", star),
        dow=Field("day-of-week", (dow,)),
        year=None,
        seconds_given=False,
    )


CRONS = {
    c.text: c
    for c in [
        cron("*/15", "*"),
        cron("0", "*"),
        cron("30", "2"),  # in New York's gap on 2027-03-14
        cron("0", "9", "1-5"),
        cron("*/5", "*"),  # under the minimum period: refused
    ]
}
ZONES = ["UTC", "America/New_York", "Europe/London"]


def next_fire(text: str, zone: str, after: datetime) -> datetime:
    """The oracle's first fire time strictly after `after`."""
    found = plain_fires(CRONS[text], zone, after, after + timedelta(days=4))
    return min(t for t in found if t > after)


@dataclass
class Model:
    tenant: str
    name: str
    cron: str
    zone: str
    label: str
    id: int = 0
    version: int = 1
    paused: bool = False
    note: str = ""
    deleted: datetime | None = None
    timing_since: datetime | None = None
    next_fire_at: datetime | None = None
    log: list[str] = field(default_factory=list)  # actions, oldest first
    triggers: set[datetime] = field(default_factory=set)

    def definition(self) -> dict:
        return {
            "tenant": self.tenant,
            "name": self.name,
            "kind": "test-noop",
            "cron": self.cron,
            "timezone": self.zone,
            "params": {"label": self.label},
        }


class RuntimeSchedules(RuleBasedStateMachine):
    url: str = ""

    def __init__(self) -> None:
        super().__init__()
        self.prefix = uuid.uuid4().hex[:8]
        self.now = START
        self.models: dict[int, Model] = {}

    def call(self, coroutine):
        return asyncio.run(coroutine)

    def clock(self):
        now = self.now
        return lambda: now

    def live(self, tenant: str) -> list[Model]:
        return [m for m in self.models.values() if m.tenant == tenant and m.deleted is None]

    # --- the rules ------------------------------------------------------------------------

    @rule(minutes=st.integers(1, 600))
    def time_passes(self, minutes: int) -> None:
        self.now += timedelta(minutes=minutes, seconds=17)

    @rule(
        tenant=st.sampled_from(["a", "a", "a", "b"]),
        name=st.sampled_from(["n1", "n2", "n3", "n4"]),
        text=st.sampled_from(sorted(CRONS)),
        zone=st.sampled_from(ZONES),
        label=st.sampled_from(["x", "y"]),
    )
    def create(self, tenant: str, name: str, text: str, zone: str, label: str):
        new = Model(f"{self.prefix}-{tenant}", name, text, zone, label)
        existing = next((m for m in self.live(new.tenant) if m.name == name), None)
        definition = new.definition()
        if CRONS[text].minute.text == "*/5":
            with pytest.raises(QuotaError, match="more often than the minimum period"):
                self.call(tenants.create(self.url, definition, quotas=QUOTAS, clock=self.clock()))
            return
        if existing is not None and existing.definition() != definition:
            with pytest.raises(ConflictError, match=f"version {existing.version}"):
                self.call(tenants.create(self.url, definition, quotas=QUOTAS, clock=self.clock()))
            return
        if existing is None and len(self.live(new.tenant)) >= QUOTAS.max_schedules:
            with pytest.raises(QuotaError, match="exceed the limit of 3"):
                self.call(tenants.create(self.url, definition, quotas=QUOTAS, clock=self.clock()))
            return
        outcome = self.call(tenants.create(self.url, definition, quotas=QUOTAS, clock=self.clock()))
        assert outcome.changed == (existing is None)
        if existing is not None:
            assert outcome.schedule.id == existing.id
            return
        new.id = outcome.schedule.id
        new.timing_since = self.now
        new.next_fire_at = next_fire(text, zone, self.now)
        new.log.append("create")
        self.models[new.id] = new

    def pick(self, data) -> Model:
        return self.models[data.draw(st.sampled_from(sorted(self.models)))]

    def refused_if_deleted(self, m: Model, call) -> bool:
        if m.deleted is None:
            return False
        with pytest.raises(ScheduleNotFoundError):
            self.call(call())
        return True

    def unless_deleted(self, m: Model, call):
        """`call()`'s outcome, or None where `m` is deleted (the call refused as not found)."""
        if self.refused_if_deleted(m, call):
            return None
        return self.call(call())

    @precondition(lambda self: self.models)
    @rule(
        data=st.data(),
        stale=st.booleans(),
        text=st.sampled_from([None, *sorted(CRONS)]),
        zone=st.sampled_from([None, *ZONES]),
        label=st.sampled_from([None, "x", "y"]),
    )
    def update(self, data, stale: bool, text, zone, label) -> None:
        m = self.pick(data)
        changes = {k: v for k, v in (("cron", text), ("timezone", zone)) if v is not None}
        if label is not None:
            changes["params"] = {"label": label}
        version = m.version - 1 if stale else m.version

        def call():
            return tenants.update(
                self.url, m.id, version, changes, quotas=QUOTAS, clock=self.clock()
            )

        if self.refused_if_deleted(m, call):
            return
        if stale:
            with pytest.raises(ConflictError, match=f"current version is {m.version}"):
                self.call(call())
            return
        new_cron, new_zone = text or m.cron, zone or m.zone
        if CRONS[new_cron].minute.text == "*/5":
            with pytest.raises(QuotaError, match="more often than the minimum period"):
                self.call(call())
            return
        new_label = label or m.label
        outcome = self.call(call())
        changed = (new_cron, new_zone, new_label) != (m.cron, m.zone, m.label)
        assert outcome.changed == changed
        if not changed:
            return
        if (new_cron, new_zone) != (m.cron, m.zone):
            m.timing_since = self.now
            m.next_fire_at = next_fire(new_cron, new_zone, self.now)
        m.cron, m.zone, m.label = new_cron, new_zone, new_label
        m.version += 1
        m.log.append("update")

    @precondition(lambda self: self.models)
    @rule(data=st.data(), note=st.sampled_from(["maintenance", "billing hold"]))
    def pause(self, data, note: str) -> None:
        m = self.pick(data)
        outcome = self.unless_deleted(
            m, lambda: tenants.pause(self.url, m.id, note, clock=self.clock())
        )
        if outcome is None:
            return
        changed = not (m.paused and m.note == note)
        assert outcome.changed == changed
        if changed:
            m.paused, m.note, m.version = True, note, m.version + 1
            m.log.append("pause")

    @precondition(lambda self: self.models)
    @rule(data=st.data())
    def resume(self, data) -> None:
        m = self.pick(data)
        outcome = self.unless_deleted(m, lambda: tenants.resume(self.url, m.id, clock=self.clock()))
        if outcome is None:
            return
        assert outcome.changed == m.paused
        if m.paused:
            m.paused, m.note, m.version = False, "", m.version + 1
            m.next_fire_at = next_fire(m.cron, m.zone, max(self.now, m.timing_since))
            m.log.append("resume")

    @precondition(lambda self: self.models)
    @rule(data=st.data())
    def delete(self, data) -> None:
        m = self.pick(data)
        outcome = self.call(tenants.delete(self.url, m.id, clock=self.clock()))
        assert outcome.changed == (m.deleted is None)
        if m.deleted is None:
            m.deleted, m.next_fire_at, m.version = self.now, None, m.version + 1
            m.log.append("delete")

    @precondition(lambda self: self.models)
    @rule(data=st.data())
    def trigger(self, data) -> None:
        m = self.pick(data)
        slot = self.now.replace(microsecond=0)
        requested = self.unless_deleted(
            m, lambda: tenants.trigger(self.url, m.id, clock=self.clock())
        )
        if requested is None:
            return
        assert bool(requested.recorded) == (slot not in m.triggers)
        if slot not in m.triggers:
            m.triggers.add(slot)
            m.log.append("trigger")

    @rule(
        tenant=st.sampled_from(["a", "a", "b"]),
        desired=st.dictionaries(
            st.sampled_from(["n1", "n2", "n3", "n4"]),
            st.tuples(
                st.sampled_from(sorted(CRONS)),
                st.sampled_from(ZONES),
                st.sampled_from(["x", "y"]),
                st.sampled_from([None, "maintenance", "billing hold"]),  # paused, and why
            ),
            max_size=4,
        ),
    )
    def apply(self, tenant: str, desired: dict) -> None:
        tenant = f"{self.prefix}-{tenant}"
        live = {m.name: m for m in self.live(tenant)}
        wanted = {}
        for name, (text, zone, label, note) in desired.items():
            new = Model(tenant, name, text, zone, label)
            wanted[name] = (new, note if name in live else None)  # a new one starts running
        definitions = [
            new.definition() | ({"paused": True, "note": note} if note else {})
            for new, note in wanted.values()
        ]

        def call():
            return tenants.apply(self.url, tenant, definitions, quotas=QUOTAS, clock=self.clock())

        if any(CRONS[new.cron].minute.text == "*/5" for new, _ in wanted.values()):
            with pytest.raises(QuotaError, match="more often than the minimum period"):
                self.call(call())
            return
        if len(wanted) > QUOTAS.max_schedules:
            with pytest.raises(QuotaError, match="exceed the limit of 3"):
                self.call(call())
            return
        report = self.call(call())
        for name, (new, note) in wanted.items():
            current = live.get(name)
            if current is None:
                new.id = self.call(tenants.find(self.url, tenant, name)).id
                new.timing_since, new.next_fire_at = (
                    self.now,
                    next_fire(new.cron, new.zone, self.now),
                )
                new.log.append("create")
                self.models[new.id] = new
                assert name in report.created
                continue
            timing = (new.cron, new.zone) != (current.cron, current.zone)
            differs = timing or new.label != current.label
            paused = note is not None
            pausing = paused != current.paused or (paused and note != current.note)
            if not (differs or pausing):
                assert name in report.unchanged
                continue
            assert name in report.updated
            if timing:
                current.timing_since = self.now
                current.next_fire_at = next_fire(new.cron, new.zone, self.now)
            current.cron, current.zone, current.label = new.cron, new.zone, new.label
            action = "update"
            if paused != current.paused:
                action = "pause" if paused else "resume"
            if not paused and current.paused:
                since = max(self.now, current.timing_since)
                current.next_fire_at = next_fire(current.cron, current.zone, since)
            current.paused, current.note = paused, note or ""
            current.version += 1
            current.log.append(action)
        for name in sorted(set(live) - set(wanted)):
            gone = live[name]
            gone.deleted, gone.next_fire_at, gone.version = self.now, None, gone.version + 1
            gone.log.append("delete")
            assert name in report.deleted

    # --- what is stored matches the model ---------------------------------------------------

    @invariant()
    def stored_as_modelled(self) -> None:
        if not self.models:
            return
        with psycopg.connect(self.url) as conn:
            rows = conn.execute(
                "SELECT id, version, paused, coalesce(paused_note, ''), deleted_at, timing_since, next_fire_at,"
                " cron, timezone, params->>'label' FROM runtime_schedules WHERE id = ANY(%s)",
                (list(self.models),),
            ).fetchall()
            logs = conn.execute(
                "SELECT schedule_id, array_agg(action ORDER BY id) FROM runtime_schedule_changes"
                " WHERE schedule_id = ANY(%s) GROUP BY schedule_id",
                (list(self.models),),
            ).fetchall()
            intents = conn.execute(
                "SELECT schedule_id, array_agg(scheduled_at ORDER BY scheduled_at) FROM runtime_dispatch_intents"
                " WHERE schedule_id = ANY(%s) GROUP BY schedule_id",
                (list(self.models),),
            ).fetchall()
        stored = {r[0]: r[1:] for r in rows}
        for m in self.models.values():
            assert stored[m.id] == (
                m.version, m.paused, m.note, m.deleted, m.timing_since, m.next_fire_at,
                m.cron, m.zone, m.label,
            ), m  # fmt: skip
        assert dict(logs) == {m.id: m.log for m in self.models.values()}
        assert dict(intents) == {
            m.id: sorted(m.triggers) for m in self.models.values() if m.triggers
        }


def test_the_runtime_schedules_api_matches_its_model(database_url) -> None:
    RuntimeSchedules.url = database_url
    run_state_machine_as_test(
        RuntimeSchedules,
        settings=settings(
            settings.default, max_examples=settings.default.max_examples // 3,
            stateful_step_count=30,
        ),
    )  # fmt: skip
