"""Runtime schedules through the Python API (`schedules.tenants`) on a real PostgreSQL:
idempotent create, versions, pause / resume / delete, quotas, apply, trigger, backfill,
explain, and that every refusal writes nothing."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from core.errors import (
    ConflictError,
    InvalidScheduleError,
    QuotaError,
    ScheduleNotFoundError,
)
from schedules import tenants
from schedules.tenants import Quotas

NOW = datetime(2027, 3, 1, 12, 0, 30, tzinfo=UTC)
QUOTAS = Quotas(max_schedules=5)
WEEKLY = {
    "tenant": "acme",
    "name": "weekly-report",
    "kind": "test-noop",
    "cron": "0 8 * * 1",
    "timezone": "America/New_York",
    "params": {"label": "weekly"},
}


def at(instant: datetime):
    return lambda: instant


def counts(url: str) -> tuple[int, int, int]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT (SELECT count(*) FROM runtime_schedules),"
            " (SELECT count(*) FROM runtime_schedule_changes),"
            " (SELECT count(*) FROM runtime_dispatch_intents)"
        ).fetchone()


async def test_create_is_idempotent_per_tenant_and_name(database_url):
    first = await tenants.create(database_url, WEEKLY, by="app", quotas=QUOTAS, clock=at(NOW))
    assert first.changed
    s = first.schedule
    assert (s.version, s.shard, s.created_by) == (1, s.id % tenants.BUCKETS, "app")
    assert s.params == {"label": "weekly", "size": 1}  # the kind's defaults filled in
    # 12:00:30Z is 07:00 EST: this Monday's 08:00 EST (13:00Z) is still to come.
    assert s.next_fire_at == datetime(2027, 3, 1, 13, 0, tzinfo=UTC)
    assert s.timing_since == NOW

    again = await tenants.create(database_url, WEEKLY, quotas=QUOTAS, clock=at(NOW))
    assert not again.changed and again.schedule.id == s.id
    assert counts(database_url) == (1, 1, 0)

    with pytest.raises(ConflictError, match=r"exists \(id \d+, version 1\) with another cron"):
        await tenants.create(database_url, WEEKLY | {"cron": "0 9 * * 1"}, quotas=QUOTAS)
    # The same name in another tenant is another schedule.
    other = await tenants.create(database_url, WEEKLY | {"tenant": "globex"}, quotas=QUOTAS)
    assert other.changed and other.schedule.id != s.id
    assert counts(database_url) == (2, 2, 0)


BAD_FIELDS = [
    ({"tenant": ""}, "tenant: must be non-empty text"),
    ({"name": "x" * 201}, "name: must be at most 200 characters"),
    ({"kind": "nope"}, "kind: unknown runtime kind 'nope'"),
    ({"cron": "61 * * * *"}, "cron: minute '61' is out of range"),
    ({"cron": "0 0 30 2 *"}, "cron: day-of-month '30' never fires"),
    ({"cron": "30 0 8 * * 1 *"}, "cron: runtime schedules fire on whole minutes"),
    ({"cron": "@every 5m"}, "cron: "),
    ({"timezone": "Mars/Olympus"}, "timezone: is not a known IANA time zone: 'Mars/Olympus'"),
    ({"timezone": "EST5EDT "}, "timezone: is not a known IANA time zone"),
    ({"timezone": "america/chicago"}, "(did you mean 'America/Chicago'?)"),
    ({"timezone": "EST5EDT"}, "timezone: 'EST5EDT' is a legacy POSIX zone, not a region's"),
    ({"timezone": "HST"}, "e.g. 'Pacific/Honolulu'; for a fixed offset give 'Etc/GMT+10'"),
    ({"params": {"size": 0}}, "params: size: Input should be greater than or equal to 1"),
    ({"params": {"colour": "red"}}, "params: colour: Extra inputs are not permitted"),
    ({"catchup": "often"}, "catchup: Input should be 'skip', 'latest' or 'all'"),
    ({"catchup": "all"}, "max_missed: catchup 'all' needs max_missed"),
    ({"max_missed": 3}, "max_missed: only applies to catchup 'all'"),
    ({"catchup": "all", "max_missed": 5000}, "max_missed: must be from 1 to 1000"),
    ({"start_at": "2027-01-01T00:00:00"}, "start_at: needs a UTC offset"),
    (
        {"start_at": "2027-02-01T00:00:00Z", "end_at": "2027-01-01T00:00:00Z"},
        "start_at: 2027-02-01 00:00:00+00:00 is not before end_at",
    ),
    ({"end_at": "2200-01-01T00:00:00Z"}, "end_at: must lie in the years 1970 to 2100"),
    ({"paused": "perhaps"}, "paused: Input should be a valid boolean"),
    ({"colour": "red"}, "colour: is not a field of a runtime schedule"),
]


@pytest.mark.parametrize(("change", "expected"), BAD_FIELDS, ids=[b[1][:30] for b in BAD_FIELDS])
async def test_each_bad_field_is_refused_in_one_line_naming_it_and_nothing_is_written(
    database_url, change, expected
):
    with pytest.raises(InvalidScheduleError) as caught:
        await tenants.create(database_url, WEEKLY | change, quotas=QUOTAS)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"schedule {(WEEKLY | change).get('tenant')!r}/"), message
    assert expected in message, message
    assert counts(database_url) == (0, 0, 0)


async def test_a_missing_field_is_named(database_url):
    data = {k: v for k, v in WEEKLY.items() if k != "timezone"}
    with pytest.raises(InvalidScheduleError, match="timezone: is required"):
        await tenants.create(database_url, data, quotas=QUOTAS)


async def test_update_needs_the_current_version_and_moves_only_later_fire_times(database_url):
    s = (await tenants.create(database_url, WEEKLY, quotas=QUOTAS, clock=at(NOW))).schedule
    later = NOW + timedelta(days=3)
    with pytest.raises(ConflictError, match="expected version 7, but the current version is 1"):
        await tenants.update(database_url, s.id, 7, {"cron": "0 9 * * 1"}, quotas=QUOTAS)

    moved = await tenants.update(
        database_url, s.id, 1, {"cron": "0 9 * * *"}, by="ops", quotas=QUOTAS, clock=at(later)
    )
    u = moved.schedule
    assert (u.version, u.cron, u.updated_by, u.timing_since) == (2, "0 9 * * *", "ops", later)
    assert u.next_fire_at == datetime(2027, 3, 4, 14, 0, tzinfo=UTC)  # 09:00 EST after later

    # Params only: the next slot the dispatcher holds stays.
    same_time = await tenants.update(
        database_url, s.id, 2, {"params": {"size": 3}}, quotas=QUOTAS, clock=at(later)
    )
    assert same_time.schedule.next_fire_at == u.next_fire_at
    assert same_time.schedule.timing_since == later and same_time.schedule.version == 3
    unchanged = await tenants.update(database_url, s.id, 3, {"params": {"size": 3}}, quotas=QUOTAS)
    assert not unchanged.changed and unchanged.schedule.version == 3

    with pytest.raises(InvalidScheduleError, match="cron: minute '99'"):
        await tenants.update(database_url, s.id, 3, {"cron": "99 * * * *"}, quotas=QUOTAS)
    with pytest.raises(InvalidScheduleError, match="tenant: cannot be updated"):
        await tenants.update(database_url, s.id, 3, {"tenant": "x"}, quotas=QUOTAS)
    log = await tenants.changes(database_url, s.id)
    assert [c["action"] for c in log] == ["update", "update", "create"]
    assert log[1]["before"]["cron"] == "0 8 * * 1" and log[1]["after"]["cron"] == "0 9 * * *"


async def test_pause_resume_and_delete(database_url):
    s = (await tenants.create(database_url, WEEKLY, quotas=QUOTAS, clock=at(NOW))).schedule
    with pytest.raises(InvalidScheduleError, match="note: say why"):
        await tenants.pause(database_url, s.id, " ")
    paused = (await tenants.pause(database_url, s.id, "card expired", by="support")).schedule
    assert (paused.paused, paused.note, paused.paused_by, paused.version) == (
        True,
        "card expired",
        "support",
        2,
    )
    assert not (await tenants.pause(database_url, s.id, "card expired")).changed
    page = await tenants.list_schedules(database_url, paused=True)
    assert [x.id for x in page.schedules] == [s.id]
    due = await tenants.list_schedules(database_url, due=True, clock=at(NOW + timedelta(days=30)))
    assert due.schedules == []  # paused: never due

    # Resumed weeks later: the Mondays that passed while paused do not run.
    weeks_later = datetime(2027, 3, 24, 12, 0, tzinfo=UTC)
    resumed = (await tenants.resume(database_url, s.id, clock=at(weeks_later))).schedule
    assert not resumed.paused and resumed.note == "" and resumed.paused_by is None
    assert resumed.next_fire_at == datetime(2027, 3, 29, 12, 0, tzinfo=UTC)  # 08:00 EDT

    gone = (await tenants.delete(database_url, s.id, by="app", expected_version=3)).schedule
    assert gone.deleted_at is not None and gone.next_fire_at is None
    assert not (await tenants.delete(database_url, s.id)).changed
    with pytest.raises(ScheduleNotFoundError, match="was deleted"):
        await tenants.pause(database_url, s.id, "late")
    with pytest.raises(ScheduleNotFoundError, match="has no schedule named"):
        await tenants.find(database_url, "acme", "weekly-report")
    assert (await tenants.get(database_url, s.id)).deleted_at is not None
    # The name is free again: a new schedule, a new id.
    again = (await tenants.create(database_url, WEEKLY, quotas=QUOTAS)).schedule
    assert again.id != s.id
    with pytest.raises(ScheduleNotFoundError, match="no runtime schedule has id 999999"):
        await tenants.resume(database_url, 999999)


async def test_quotas_refuse_in_one_line_naming_tenant_limit_and_value(database_url):
    small = Quotas(max_schedules=2, min_period=timedelta(minutes=15))
    with pytest.raises(QuotaError) as caught:
        await tenants.create(database_url, WEEKLY | {"cron": "*/5 * * * *"}, quotas=small)
    assert str(caught.value) == (
        "tenant 'acme': schedule 'weekly-report' fires every 5m ('*/5 * * * *'), more often "
        "than the minimum period 15m (TENANT_MIN_PERIOD_SECONDS); nothing was written"
    )
    # Every minute is allowed by default.
    every = await tenants.create(database_url, WEEKLY | {"cron": "* * * * *"}, quotas=Quotas())
    assert every.changed
    await tenants.create(database_url, WEEKLY | {"name": "b"}, quotas=small)
    with pytest.raises(QuotaError) as caught:
        await tenants.create(database_url, WEEKLY | {"name": "c"}, quotas=small)
    assert str(caught.value) == (
        "tenant 'acme': 2 schedule(s) stored and 1 more would exceed the limit of 2 "
        "(TENANT_MAX_SCHEDULES); nothing was written"
    )
    assert counts(database_url) == (2, 2, 0)
    # A deleted schedule no longer counts.
    await tenants.delete(database_url, every.schedule.id)
    assert (await tenants.create(database_url, WEEKLY | {"name": "c"}, quotas=small)).changed


async def test_apply_makes_a_tenants_set_exactly_the_given_one(database_url):
    keep = WEEKLY | {"name": "keep"}
    await tenants.create(database_url, keep, quotas=QUOTAS, clock=at(NOW))
    await tenants.create(database_url, WEEKLY | {"name": "change"}, quotas=QUOTAS, clock=at(NOW))
    await tenants.create(database_url, WEEKLY | {"name": "drop"}, quotas=QUOTAS, clock=at(NOW))
    await tenants.create(database_url, WEEKLY | {"tenant": "globex"}, quotas=QUOTAS)
    desired = [
        {k: v for k, v in keep.items() if k != "tenant"},
        WEEKLY | {"name": "change", "cron": "0 7 * * 1", "paused": True, "note": "trial"},
        WEEKLY | {"name": "new"},
    ]
    dry = await tenants.apply(database_url, "acme", desired, dry_run=True, quotas=QUOTAS)
    assert dry.created == ["new"] and dry.deleted == ["drop"]
    assert counts(database_url)[0] == 4

    report = await tenants.apply(database_url, "acme", desired, by="sync", quotas=QUOTAS)
    assert report.created == ["new"]
    assert report.updated == {"change": ["cron", "paused"]}
    assert report.deleted == ["drop"] and report.unchanged == ["keep"]
    live = (await tenants.list_schedules(database_url, tenant="acme")).schedules
    assert sorted(s.name for s in live) == ["change", "keep", "new"]
    changed = await tenants.find(database_url, "acme", "change")
    assert (changed.cron, changed.paused, changed.note) == ("0 7 * * 1", True, "trial")
    assert (await tenants.find(database_url, "globex", "weekly-report")).deleted_at is None
    again = await tenants.apply(database_url, "acme", desired, quotas=QUOTAS)
    assert not again.changed

    before = counts(database_url)
    with pytest.raises(InvalidScheduleError, match="cron: minute '77'"):
        await tenants.apply(
            database_url, "acme", [*desired[:1], WEEKLY | {"name": "x", "cron": "77 * * * *"}]
        )
    with pytest.raises(InvalidScheduleError, match="tenant: apply for 'acme' takes only"):
        await tenants.apply(database_url, "acme", [WEEKLY | {"tenant": "globex"}])
    with pytest.raises(QuotaError, match="exceed the limit of 5"):
        await tenants.apply(
            database_url, "acme", [WEEKLY | {"name": f"n{i}"} for i in range(6)], quotas=QUOTAS
        )
    assert counts(database_url) == before


async def test_trigger_backfill_and_explain_record_intents(database_url):
    s = (await tenants.create(database_url, WEEKLY, quotas=QUOTAS, clock=at(NOW))).schedule
    now = datetime(2027, 3, 20, 10, 15, 42, 123456, tzinfo=UTC)
    triggered = await tenants.trigger(database_url, s.id, by="support", clock=at(now))
    (intent,) = triggered.recorded
    assert intent.scheduled_at == now.replace(microsecond=0) and intent.origin == "manual"
    assert intent.workflow_id == f"rt-{s.id}-2027-03-20T10:15:42Z"
    assert intent.started_at is None  # the dispatcher starts it
    # Twice in one second is one slot.
    assert (await tenants.trigger(database_url, s.id, clock=at(now))).already == [
        now.replace(microsecond=0)
    ]

    start, end = datetime(2027, 3, 1, tzinfo=UTC), datetime(2027, 3, 20, tzinfo=UTC)
    dry = await tenants.backfill(database_url, s.id, start, end, dry_run=True, clock=at(now))
    mondays = [datetime(2027, 3, 1, 13, tzinfo=UTC), datetime(2027, 3, 8, 13, tzinfo=UTC)]
    mondays.append(datetime(2027, 3, 15, 12, tzinfo=UTC))
    # The plan names the slots that would run as such; none was recorded before.
    assert dry.would_run == mondays and dry.already == [] and dry.recorded == []
    assert counts(database_url)[2] == 1
    done = await tenants.backfill(database_url, s.id, start, end, clock=at(now))
    assert [i.scheduled_at for i in done.recorded] == mondays
    assert {i.origin for i in done.recorded} == {"backfill"}
    assert (
        await tenants.backfill(database_url, s.id, start, end, clock=at(now))
    ).already == mondays
    dry = await tenants.backfill(database_url, s.id, start, end, dry_run=True, clock=at(now))
    assert dry.would_run == [] and dry.already == mondays  # recorded: nothing would run again
    with pytest.raises(InvalidScheduleError, match=r"end: .* is after now"):
        await tenants.backfill(database_url, s.id, start, now + timedelta(days=1), clock=at(now))

    told = await tenants.explain(database_url, s.id, mondays[1], clock=at(now))
    assert told.fire_time and told.intent is not None
    assert told.verdict.startswith("backfill start decided at")
    off = await tenants.explain(database_url, s.id, mondays[1] + timedelta(minutes=1))
    assert not off.fire_time and off.verdict.startswith("not a fire time")
    future = await tenants.explain(
        database_url, s.id, datetime(2027, 4, 5, 12, tzinfo=UTC), clock=at(now)
    )
    assert future.verdict == "a future fire time"
    # A ledger row is the verdict once the slot ran.
    with psycopg.connect(database_url) as conn:
        conn.execute(
            "INSERT INTO job_executions (job_name, scheduled_at, status, attempt, origin)"
            " VALUES (%s, %s, 'completed', 1, 'backfill')",
            (tenants.ledger_name(s.id), mondays[1]),
        )
    ran = await tenants.explain(database_url, s.id, mondays[1], clock=at(now))
    assert ran.verdict == "completed (backfill, attempt 1)"
    assert [r["scheduled_at"] for r in await tenants.runs(database_url, s.id)] == [mondays[1]]
    log = [c["action"] for c in await tenants.changes(database_url, s.id)]
    assert log == ["backfill", "trigger", "create"]  # the repeats recorded nothing


async def test_a_callers_connection_holds_the_write_in_its_transaction(database_url):
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        async with conn.transaction(force_rollback=True):
            await tenants.create(conn, WEEKLY, quotas=QUOTAS)
            assert counts(database_url) == (0, 0, 0)  # not committed yet
    assert counts(database_url) == (0, 0, 0)


async def test_concurrent_creates_of_one_name_make_one_schedule_and_keep_the_quota(database_url):
    tight = Quotas(max_schedules=3)
    outcomes = await asyncio.gather(
        *(tenants.create(database_url, WEEKLY, quotas=tight) for _ in range(4))
    )
    assert sum(o.changed for o in outcomes) == 1
    assert len({o.schedule.id for o in outcomes}) == 1
    results = await asyncio.gather(
        *(tenants.create(database_url, WEEKLY | {"name": f"n{i}"}, quotas=tight) for i in range(4)),
        return_exceptions=True,
    )
    assert sum(isinstance(r, QuotaError) for r in results) == 2  # 1 + 2 fit under 3
    assert counts(database_url)[:2] == (3, 3)


def test_the_migration_builds_the_indexes_the_dispatcher_and_the_names_rely_on(database_url):
    with psycopg.connect(database_url) as conn:
        found = dict(
            conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'runtime_schedules'"
            ).fetchall()
        )
    assert found["runtime_schedules_name"].endswith(
        "USING btree (tenant, name) WHERE (deleted_at IS NULL)"
    )
    assert found["runtime_schedules_due"].endswith(
        "USING btree (shard, next_fire_at) WHERE ((deleted_at IS NULL) AND (NOT paused))"
    )


def test_a_kind_registered_in_process_is_usable_and_names_are_unique():
    from pydantic import BaseModel

    class Params(BaseModel):
        pages: int = 1

    kind = tenants.register_kind(tenants.RuntimeKind("test-registered", Params))
    assert tenants.runtime_kind("test-registered") is kind
    assert tenants.Definition.model_validate(WEEKLY | {"kind": "test-registered", "params": {}})
    with pytest.raises(ValueError, match="already registered"):
        tenants.register_kind(tenants.RuntimeKind("test-noop", Params))


async def test_list_pages_by_id_and_filters(database_url):
    for i in range(5):
        await tenants.create(
            database_url, WEEKLY | {"name": f"r{i}", "tenant": f"t{i % 2}"}, quotas=QUOTAS
        )
    first = await tenants.list_schedules(database_url, limit=2)
    second = await tenants.list_schedules(database_url, limit=2, after=first.next_after)
    third = await tenants.list_schedules(database_url, limit=2, after=second.next_after)
    names = [s.name for page in (first, second, third) for s in page.schedules]
    assert names == ["r0", "r1", "r2", "r3", "r4"] and third.next_after is None
    only = await tenants.list_schedules(database_url, tenant="t1", kind="test-noop")
    assert [s.name for s in only.schedules] == ["r1", "r3"]
    assert (await tenants.list_schedules(database_url, kind="other")).schedules == []
    with pytest.raises(InvalidScheduleError, match="limit: must be from 1 to 10000"):
        await tenants.list_schedules(database_url, limit=0)
