"""What the audit judges beyond the fire times of a schedule's timing (issue 36, item 7):
the slots a runtime schedule's dispatcher had decided when a pause or delete came, the
slots a backfill asked for before the job's timing took effect, and the backfill command
looking for its own request's first run. Each anomaly is one a fault leaves: seeded in the
database as it would leave it, or made for real (the dev server drops a backfill's start
whose workflow id a running workflow holds, as it drops one lost among schedule updates).
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta
from functools import partial

import psycopg
import pytest
from temporalio.service import RPCError, RPCStatusCode

import schedules as library
from core.ids import workflow_id
from schedules import tenants
from schedules.audit.history import Window
from schedules.audit.runtime import audit_runtime
from schedules.catalog.model import load_catalog
from tests.helpers import assert_eventually
from tests.helpers.audit import audit_report
from tests.helpers.worker import schedules_said
from tests.integration.jobs import executions, trigger_at
from tests.integration.runtime import audit_clean, dispatcher, fresh_ids, settled, tick_all

pytestmark = pytest.mark.timeout(300)

_NOW = datetime.now(UTC)
T0 = _NOW.replace(minute=_NOW.minute // 10 * 10, second=0, microsecond=0) - timedelta(hours=2)
LATE = timedelta(days=1)  # the dispatcher's clock is two hours behind: its runs are that late
HOUR = timedelta(hours=1)
# Yesterday's hours, before the timing of a schedule synced today took effect.
DAY = _NOW.replace(minute=0, second=0, microsecond=0) - timedelta(days=1)


def at(minutes: int, seconds: int = 0) -> datetime:
    return T0 + timedelta(minutes=minutes, seconds=seconds)


def clock(instant: datetime):
    return lambda: instant


def findings(report) -> list[tuple[str, str | None, datetime | None]]:
    return sorted((f.kind, f.job, f.slot) for f in report.findings)


async def test_a_slot_decided_just_before_a_pause_or_delete_is_judged(
    db, database_url, client, task_queue, start_workers
):
    """Three every-minute schedules, dispatched at 1 and 2 and stopped at 3:30, inside the
    pause's grace of 3:00. Two the dispatcher had passed 3:00 of, recording nothing (the
    fault): one paused, one deleted; their 3:00 was decided, so it is lost. The third was
    paused before the dispatcher reached 3:00: not decided, not due."""
    start_workers(1)
    fresh_ids(db)

    def every_minute(name: str) -> dict:
        return {"tenant": "acme", "name": name, "kind": "test-noop", "cron": "* * * * *",
                "timezone": "UTC"}  # fmt: skip

    made = {
        name: (
            await tenants.create(database_url, every_minute(name), clock=clock(at(0, 30)))
        ).schedule.id
        for name in ("paused", "deleted", "held")
    }
    async with dispatcher(database_url, client, task_queue) as d:
        for minute in (1, 2):
            await tick_all(d, at(minute))
        await settled(db, 6)
    db.execute(
        "UPDATE runtime_schedules SET next_fire_at = %s WHERE id = ANY(%s)",
        (at(4), [made["paused"], made["deleted"]]),
    )
    stopped = clock(at(3, 30))
    await tenants.pause(database_url, made["paused"], "maintenance", clock=stopped)
    await tenants.pause(database_url, made["held"], "maintenance", clock=stopped)
    await tenants.delete(database_url, made["deleted"], clock=stopped)

    window = Window(at(0), at(5), datetime.now(UTC), timedelta(0), LATE, timedelta(minutes=15))
    judged = await audit_runtime(database_url, client, window, task_queue=task_queue, timeout=30)
    assert findings(judged) == sorted(
        ("lost", f"rt-{made[name]}", at(3)) for name in ("paused", "deleted")
    )
    assert {s.job.id: s.due for s in judged.scopes} == {
        f"rt-{made['paused']}": 3,
        f"rt-{made['deleted']}": 3,
        f"rt-{made['held']}": 2,
    }


def write_catalog(tmp_path, job_id: str):
    path = tmp_path / "jobs.toml"
    path.write_text(
        f'[{job_id}]\nkind = "invoice-reminders"\ndescription = "audit test"\n'
        'cron = "0 * * * *"\ntimezone = "UTC"\npaused = true\n'
        'note = "test: backfilled and triggered runs only"\n'
    )
    return path


async def schedules(settings, catalog, *args: str) -> tuple[int, str]:
    """`python -m schedules --catalog CATALOG ARGS`: its exit code and its output."""
    return await asyncio.to_thread(schedules_said, settings, *args, catalog=catalog)


async def held(client, task_queue: str, job_id: str, slot: datetime):
    """A running workflow, started outside the job's schedule, under the id of the job's
    run of `slot`: the server drops a start of that slot (measured on the dev server 1.32)."""
    held_id = workflow_id(job_id, slot)
    return await client.start_workflow("HeldSlot", id=held_id, task_queue=f"{task_queue}-idle")


async def audit_of(client, database_url, task_queue, catalog, start: datetime, end: datetime):
    jobs = load_catalog(catalog, engine=False)
    return await audit_report(client, database_url, task_queue, jobs, start=start, end=end)


async def test_a_backfill_the_server_drops_before_the_timing_took_effect_is_lost(
    settings, db, client, database_url, task_queue, start_workers, tmp_path
):
    """A job synced now, backfilled over three of yesterday's hours: the server drops the
    middle one. The audit judges those hours by the request, not by the timing (in force
    from today): the dropped hour is lost, naming the request; the two that ran are fine."""
    start_workers(1)
    catalog = write_catalog(tmp_path, "asked-hours")
    slots = [DAY + HOUR * i for i in range(3)]
    assert (await schedules(settings, catalog, "sync", "--no-prune"))[0] == 0
    holder = await held(client, task_queue, "asked-hours", slots[1])
    try:
        start, end = (f"{t:%Y-%m-%dT%H:%M:%SZ}" for t in (slots[0], slots[-1] + HOUR))
        code, out = await schedules(
            settings, catalog, "backfill", "asked-hours", "--start", start, "--end", end
        )
        assert code == 0, out

        async def ran():
            rows = executions(db, "asked-hours")
            assert [(r["scheduled_at"], r["status"]) for r in rows] == [
                (slots[0], "completed"),
                (slots[2], "completed"),
            ]

        await assert_eventually(ran, timeout=90)
        report = await audit_of(
            client, database_url, task_queue, catalog, DAY - HOUR, DAY + 4 * HOUR
        )
        assert findings(report) == [("lost", "asked-hours", slots[1])]
        (request,) = db.execute("SELECT id, slots FROM backfill_requests").fetchall()
        assert request[1] == slots
        assert report.findings[0].witnesses["backfill_id"] == request[0]
    finally:
        await holder.terminate()
        await client.get_schedule_handle("asked-hours").delete()


async def test_the_library_backfill_does_what_the_command_does(
    settings, db, client, database_url, task_queue, start_workers, tmp_path
):
    """`schedules.backfill` records the request and picks the command's strategy: one
    Temporal backfill when the server's schedule fires the job's times, else one trigger per
    fire time (here the catalog moved the job to :30 and was not synced). A range reaching
    past now is refused before anything is sent."""
    start_workers(1)
    synced = write_catalog(tmp_path, "lib-backfill")
    assert (await schedules(settings, synced, "sync", "--no-prune"))[0] == 0
    (job,) = load_catalog(synced, engine=False)
    unsynced = tmp_path / "moved" / "jobs.toml"
    unsynced.parent.mkdir()
    unsynced.write_text(synced.read_text().replace('cron = "0 * * * *"', 'cron = "30 * * * *"'))
    (moved,) = load_catalog(unsynced, engine=False)
    try:
        with pytest.raises(ValueError, match="is after now"):
            await library.backfill(client, job, DAY, _NOW + HOUR, conninfo=database_url)
        whole = await library.backfill(client, job, DAY, DAY + 2 * HOUR, conninfo=database_url)
        assert (whole.times, whole.whole, whole.unrecorded) == ([DAY, DAY + HOUR], True, None)
        each = await library.backfill(client, moved, DAY, DAY + HOUR, conninfo=database_url)
        half = DAY + HOUR / 2
        assert (each.times, each.whole) == ([half], False)
        assert each.how.startswith("one trigger per fire time")

        async def ran():
            rows = executions(db, "lib-backfill")
            assert [(r["scheduled_at"], r["status"]) for r in rows] == [
                (DAY, "completed"),
                (half, "completed"),
                (DAY + HOUR, "completed"),
            ]

        await assert_eventually(ran, timeout=90)
        asked = db.execute("SELECT slots FROM backfill_requests ORDER BY id").fetchall()
        assert [slots for (slots,) in asked] == [[DAY, DAY + HOUR], [half]]
        report = await audit_of(client, database_url, task_queue, synced, DAY, DAY + 2 * HOUR)
        assert findings(report) == []
    finally:
        await client.get_schedule_handle("lib-backfill").delete()


async def started(run) -> None:
    try:
        await run.describe()
    except RPCError as exc:
        assert exc.status != RPCStatusCode.NOT_FOUND, "not started yet"
        raise


async def test_the_backfill_command_waits_for_its_own_first_run_not_for_any_start(
    settings, client, database_url, task_queue, tmp_path
):
    """The server drops a backfill's only start while triggers of the same schedule keep
    starting runs: the command does not take another request's start for its own (exit 1,
    naming the run it looked for), and the audit finds the slot asked for lost."""
    catalog = write_catalog(tmp_path, "asked-once")
    assert (await schedules(settings, catalog, "sync", "--no-prune"))[0] == 0
    holder = await held(client, task_queue, "asked-once", DAY)
    try:
        start, end = (f"{t:%Y-%m-%dT%H:%M:%SZ}" for t in (DAY, DAY + HOUR))
        command = asyncio.create_task(
            schedules(settings, catalog, "backfill", "asked-once", "--start", start, "--end", end)
        )
        # Concurrent requests until the command ends: triggers, each of its own second,
        # the next once the last one's run exists (asked of the run, not of the schedule:
        # the scheduler answers a bounded queue of describes, which the command polls).
        # The dev server loses some patches that arrive together (the backfill's and a
        # trigger's): a lost trigger is one concurrent request fewer, not the subject.
        nominal = datetime.now(UTC)
        while not command.done():
            nominal += timedelta(seconds=1)
            await trigger_at(client, "asked-once", nominal)
            run = client.get_workflow_handle(workflow_id("asked-once", nominal))
            with contextlib.suppress(AssertionError):
                await assert_eventually(partial(started, run), timeout=3, interval=0.2)
        code, out = await command
        assert code == 1, out
        assert f"did not start its first run (asked-once-{start})" in out

        report = await audit_of(client, database_url, task_queue, catalog, DAY, DAY + HOUR)
        assert findings(report) == [("lost", "asked-once", DAY)]
    finally:
        await holder.terminate()
        await client.get_schedule_handle("asked-once").delete()


async def test_a_pause_by_apply_is_a_pause_to_the_audit(database_url, client, task_queue):
    """`tenants apply` that pauses a schedule logs a pause, as `tenants pause` does, so the
    audit excuses the fire times under it (logged as an update, they were `lost`)."""
    start = datetime(2027, 3, 1, 12, 0, 10, tzinfo=UTC)  # its first slot: 12:01
    every_minute = {"name": "ping", "kind": "test-noop", "cron": "* * * * *", "timezone": "UTC"}
    await tenants.apply(database_url, "acme", [every_minute], clock=lambda: start)
    paused = every_minute | {"paused": True, "note": "maintenance"}
    await tenants.apply(
        database_url, "acme", [paused], by="ops", clock=lambda: start + timedelta(seconds=30)
    )
    with psycopg.connect(database_url) as db:
        actions = db.execute("SELECT action FROM runtime_schedule_changes ORDER BY id").fetchall()
    assert [a for (a,) in actions] == ["create", "pause"]
    await audit_clean(
        database_url, client, task_queue, start, start + timedelta(minutes=30),
        now=start + timedelta(minutes=30),
    )  # fmt: skip
