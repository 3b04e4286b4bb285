"""A runtime schedule's life through the API (`schedules.tenants`) with the dispatcher on
real servers: pause and resume, an edit, a trigger, a backfill, a delete while its slot's
run is working. The API's clock and the dispatcher's are the test's, two hours ago."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from activities.runtime.models import KIND_ATTRIBUTE, SCHEDULE_ATTRIBUTE, TENANT_ATTRIBUTE
from devstack import free_port
from schedules import tenants
from schedules.sync.attributes import runtime_attributes
from tests.helpers.worker import schedules_cli
from tests.integration.runtime import (
    audit_clean,
    dispatcher,
    fresh_ids,
    settled,
    slot_rows,
    tick_all,
)

pytestmark = pytest.mark.timeout(240)

_NOW = datetime.now(UTC)
T0 = _NOW.replace(minute=_NOW.minute // 10 * 10, second=0, microsecond=0) - timedelta(hours=2)
LATE = timedelta(days=1)  # the clock is two hours behind: runs are claimed that late


def at(minutes: int, seconds: int = 0) -> datetime:
    return T0 + timedelta(minutes=minutes, seconds=seconds)


def clock(instant: datetime):
    return lambda: instant


def every_minute(name: str) -> dict:
    return {"tenant": "acme", "name": name, "kind": "test-noop", "cron": "* * * * *",
            "timezone": "UTC"}  # fmt: skip


async def test_pause_resume_edit_trigger_backfill(
    db, database_url, client, task_queue, start_workers
):
    start_workers(1)
    fresh_ids(db)
    made = [
        (await tenants.create(database_url, every_minute(n), clock=clock(at(0, 30)))).schedule
        for n in ("edited", "paused")
    ]
    edited, paused = (s.id for s in made)
    async with dispatcher(database_url, client, task_queue) as d:
        for minute in (1, 2, 3):
            await tick_all(d, at(minute))
        for sid in (edited, paused):
            await tenants.pause(database_url, sid, "maintenance", clock=clock(at(3, 30)))
        for minute in (4, 5):
            await tick_all(d, at(minute))  # paused: nothing of either is dispatched
        for sid in (edited, paused):
            await tenants.resume(database_url, sid, clock=clock(at(5, 30)))
        await tick_all(d, at(6))
        current = await tenants.get(database_url, edited)
        await tenants.update(
            database_url, edited, current.version, {"cron": "*/2 * * * *"}, clock=clock(at(6, 30))
        )
        for minute in (7, 8):
            await tick_all(d, at(minute))
        await tenants.trigger(database_url, edited, clock=clock(at(8, 40)))
        await tick_all(d, at(9))
        await tenants.backfill(database_url, edited, at(3, 50), at(5), clock=clock(at(9, 10)))
        await tick_all(d, at(10))
        await settled(db, 8 + 8)

    def slots(sid):
        return [(r["scheduled_at"] - T0, r["status"], r["origin"]) for r in slot_rows(db, sid)]

    m = timedelta(minutes=1)
    assert slots(edited) == [
        (1 * m, "completed", "scheduled"),
        (2 * m, "completed", "scheduled"),
        (3 * m, "completed", "scheduled"),
        (4 * m, "completed", "backfill"),  # paused then, run later by the backfill
        (6 * m, "completed", "scheduled"),  # resumed: the next fire time after the resume
        (8 * m, "completed", "scheduled"),  # edited to */2 at 6:30: 7 is no fire time
        (8 * m + timedelta(seconds=40), "completed", "manual"),
        (10 * m, "completed", "scheduled"),
    ]
    assert [s for s, _, _ in slots(paused)] == [i * m for i in (1, 2, 3, 6, 7, 8, 9, 10)]
    await audit_clean(database_url, client, task_queue, at(0), at(11), late=LATE)


async def test_a_delete_never_interrupts_a_run(
    db, database_url, client, task_queue, start_workers, gate
):
    start_workers(1, **gate.env)
    fresh_ids(db)
    made = [
        (await tenants.create(database_url, every_minute(f"s{i}"), clock=clock(at(0, 30)))).schedule
        for i in range(8)
    ]
    doomed = made[0].id
    async with dispatcher(database_url, client, task_queue) as d:
        await tick_all(d, at(1))
        await gate.reached(4)  # one batch per shard, each before its first slot
        await tenants.delete(database_url, doomed, clock=clock(at(1, 20)))
        gate.open()
        await settled(db, 8)
        await tick_all(d, at(2))
        await settled(db, 15)
    assert [(r["scheduled_at"], r["status"]) for r in slot_rows(db, doomed)] == [
        (at(1), "completed")
    ]
    await audit_clean(database_url, client, task_queue, at(0), at(3), late=LATE)


async def test_a_trigger_given_a_client_starts_at_once_and_is_found_by_tenant(
    db, database_url, client, task_queue, start_workers
):
    start_workers(1)
    fresh_ids(db)
    await runtime_attributes(client, register=True)
    made = (await tenants.create(database_url, every_minute("now"))).schedule
    await tenants.pause(database_url, made.id, "triggered only")
    done = await tenants.trigger(database_url, made.id, client=client, task_queue=task_queue)
    assert done.started == [done.recorded[0].workflow_id]  # no tick needed
    await settled(db, 1)
    (row,) = slot_rows(db, made.id)
    assert (row["status"], row["origin"]) == ("completed", "manual")
    described = await client.get_workflow_handle(done.started[0]).describe()
    attributes = described.typed_search_attributes
    assert attributes.get(TENANT_ATTRIBUTE) == "acme"
    assert attributes.get(SCHEDULE_ATTRIBUTE) == "now"
    assert attributes.get(KIND_ATTRIBUTE) == "test-noop"
    # The Temporal UI's summary and details of the run (issue 39, item 5).
    slot = done.recorded[0].scheduled_at
    assert await described.static_summary() == f"acme/now: {slot:%Y-%m-%d %H:%M:%S} UTC (manual)"
    details = await described.static_details()
    assert f"- schedule: now (runtime schedule {made.id}, kind test-noop)" in details


async def test_tenants_trigger_on_the_command_line_starts_the_run_and_waits_for_it(
    db, database_url, client, task_queue, settings, start_workers
):
    start_workers(1)
    fresh_ids(db)
    await runtime_attributes(client, register=True)
    made = (await tenants.create(database_url, every_minute("cli"))).schedule
    await tenants.pause(database_url, made.id, "triggered only")
    nowhere = settings.model_copy(update={"temporal_address": f"127.0.0.1:{free_port()}"})
    away = schedules_cli(nowhere, "tenants", "trigger", str(made.id))
    assert away.returncode == 1 and "Temporal" in away.stderr, away.stderr
    assert db.execute("SELECT count(*) FROM runtime_dispatch_intents").fetchone() == (0,)

    done = schedules_cli(settings, "tenants", "trigger", made.ledger_name, "--wait")
    assert done.returncode == 0, done.stdout + done.stderr
    started, note, outcome, summary = done.stdout.splitlines()
    assert started.startswith(f"started {made.ledger_name}-") and "acme/cli" in started
    assert note.startswith("note: the schedule is paused by an unrecorded writer (triggered only)")
    assert "manual" in outcome and "completed" in outcome and "noop 1" in outcome, outcome
    assert summary.startswith(f"1 run(s) of {made.ledger_name}: 1 ran")
    (row,) = slot_rows(db, made.id)  # started at once: no dispatcher ran here
    assert (row["status"], row["origin"]) == ("completed", "manual")
    (marked,) = db.execute("SELECT started_at FROM runtime_dispatch_intents").fetchone()
    assert marked is not None
    start = row["scheduled_at"] - timedelta(minutes=1)
    await audit_clean(database_url, client, task_queue, start, start + timedelta(minutes=3))


async def test_a_schedule_created_paused_loses_no_slot_in_the_audit(
    db, database_url, client, task_queue
):
    """Created with `paused: true` two hours ago (the test's clock), it never ran: its
    fire times since are excused by the pause its creation opened, not reported lost."""
    fresh_ids(db)
    data = every_minute("born-paused") | {"paused": True, "note": "waiting for sign-off"}
    made = (await tenants.create(database_url, data, clock=clock(at(0, 30)))).schedule
    assert made.paused
    assert slot_rows(db, made.id) == []
    await audit_clean(database_url, client, task_queue, at(0), at(30))
