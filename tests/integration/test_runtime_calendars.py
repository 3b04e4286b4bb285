"""Runtime schedules under every `on_holiday` rule, on the real servers: a slot a calendar
moves before its own time (`preceding`, `modified_following` at a month's end) is decided,
started and claimed at its fire time, under its own time; a backfill takes the slots whose
fire times fall in its range; the audit judges the ledger clean.

The first test needs a slot whose own time is still ahead of the Temporal server's clock
(the claim refuses a slot ahead of it unless the slot is due, `activities.claim.executions`): it
reads the wall clock once, for today's date, and builds its calendar around it (tomorrow
closed), so it holds on any day at any hour.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import psycopg
import pytest

from schedules import tenants
from tests.integration import runtime

pytestmark = pytest.mark.timeout(240)

NEW_YORK = ZoneInfo("America/New_York")
LATE = timedelta(days=3650)  # the dispatcher's clock is in the past: runs start long after


def intents(db, schedule_id: int) -> dict[datetime, dict]:
    cur = db.cursor(row_factory=psycopg.rows.dict_row)
    rows = cur.execute(
        "SELECT * FROM runtime_dispatch_intents WHERE schedule_id = %s", (schedule_id,)
    ).fetchall()
    return {r["scheduled_at"]: r for r in rows}


def midnight(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


@pytest.mark.parametrize("batches", [True, False], ids=["batch", "per-slot"])
async def test_a_preceding_slot_runs_before_its_own_time_under_its_own_time(
    db, database_url, client, task_queue, start_workers, batches
):
    """Daily at 00:00 UTC on a calendar that closes tomorrow, `preceding`: today's 00:00
    fire runs today's slot and tomorrow's. Tomorrow's slot is still ahead of the server's
    clock, and is claimed and completed now, under its own time."""
    start_workers(1)
    runtime.fresh_ids(db)
    today = datetime.now(UTC).date()  # the server's clock decides what is ahead: see above
    tomorrow = today + timedelta(days=1)
    # Today runs (a business day), and so do the two days after tomorrow when they fall on
    # a weekend: else, on a Thursday, `preceding` moves Saturday's and Sunday's slots to
    # today too, over the closed Friday.
    after = [tomorrow + timedelta(days=n) for n in (1, 2)]
    open_days = [d for d in (today, *after) if d.weekday() >= 5]
    # A calendar made for the test (a catalog would name it): given as a model, since the
    # API resolves a definition from its name only.
    defined = tenants.Definition.model_validate(
        {
            "tenant": "acme",
            "name": "close",
            "kind": "test-noop",
            "cron": "0 0 * * *",
            "timezone": "UTC",
            "calendar": "ops",
            "calendar_definition": {
                "name": "ops",
                "extra_holidays": [tomorrow.isoformat()],
                "extra_working_days": [d.isoformat() for d in open_days],
            },
            "on_holiday": "preceding",
        }
    )
    created = await tenants.create(
        database_url, defined, by="test", clock=lambda: midnight(today) - timedelta(hours=1)
    )
    schedule = created.schedule
    assert schedule.next_fire_at == midnight(today)
    (fire,) = tenants.next_fire_times(schedule, midnight(today) - timedelta(hours=1), 1)
    assert fire.at == midnight(today) and fire.calendar.startswith(
        f"moved from {tomorrow:%a} {tomorrow} 00:00 to {today:%a} {today}"
    )

    async with runtime.dispatcher(database_url, client, task_queue, batches=batches) as d:
        counts = await runtime.tick_all(d, midnight(today) + timedelta(minutes=1))
        assert (counts.intents, counts.skipped) == (2, 0)
        await runtime.settled(db, 2, timeout=120)
    decided = intents(db, schedule.id)
    assert decided[midnight(tomorrow)]["due_at"] == midnight(today)
    assert decided[midnight(today)]["due_at"] is None  # due at its own time
    rows = runtime.slot_rows(db, schedule.id)
    assert [(r["scheduled_at"], r["status"]) for r in rows] == [
        (midnight(today), "completed"),
        (midnight(tomorrow), "completed"),
    ]
    assert rows[1]["started_at"] < midnight(tomorrow)  # before its own time, on PG's clock
    told = await tenants.explain(database_url, schedule.id, midnight(tomorrow))
    assert told.fire_time and told.verdict.startswith("completed (scheduled")
    await runtime.audit_clean(
        database_url,
        client,
        task_queue,
        midnight(today) - timedelta(hours=1),
        midnight(tomorrow) + timedelta(hours=1),
        late=timedelta(days=1),  # the dispatcher's clock ticked at 00:01, the runs now
    )


def at9(day: int, month: int) -> datetime:
    return datetime(2026, month, day, 9, tzinfo=NEW_YORK).astimezone(UTC)


async def test_modified_following_moves_a_month_end_back_and_the_rest_forward(
    db, database_url, client, task_queue, start_workers
):
    """09:00 New York on NYSE days, `modified_following`, 29 October to 4 November 2026,
    the dispatcher's clock every 6 hours: Saturday 31 October would move into November, so
    it runs on Friday 30 (decided before its own time); Sunday 1 November (the fall-back
    day) runs on Monday 2. Each slot runs once, under its own time; a backfill of the week
    afterwards runs each slot again as a no-op; the audit is clean."""
    start_workers(1)
    runtime.fresh_ids(db)
    created = await tenants.create(
        database_url,
        {
            "tenant": "acme",
            "name": "month-end",
            "kind": "test-noop",
            "cron": "0 9 * * *",
            "timezone": "America/New_York",
            "calendar": "NYSE",
            "on_holiday": "modified_following",
            "catchup": "all",
            "max_missed": 10,
        },
        by="test",
        clock=lambda: at9(29, 10) - timedelta(hours=1),
    )
    schedule = created.schedule
    async with runtime.dispatcher(database_url, client, task_queue) as d:
        now = at9(29, 10) - timedelta(hours=1)
        while now < at9(4, 11):
            await runtime.tick_all(d, now)
            now += timedelta(hours=6)
        await runtime.settled(db, 6, timeout=120)
    slots = [at9(29, 10), at9(30, 10), at9(31, 10), at9(1, 11), at9(2, 11), at9(3, 11)]
    rows = runtime.slot_rows(db, schedule.id)
    assert [(r["scheduled_at"], r["status"]) for r in rows] == [(s, "completed") for s in slots]
    decided = intents(db, schedule.id)
    assert decided[at9(31, 10)]["due_at"] == at9(30, 10)
    assert decided[at9(31, 10)]["decided_at"] < at9(31, 10)  # at the tick after Friday's
    assert decided[at9(1, 11)]["due_at"] == at9(2, 11)
    assert decided[at9(1, 11)]["decided_at"] >= at9(2, 11)

    again = await tenants.backfill(
        database_url, schedule.id, at9(30, 10), at9(30, 10) + timedelta(minutes=1), by="test"
    )
    assert again.recorded == [] and sorted(again.already) == [at9(30, 10), at9(31, 10)]
    await runtime.audit_clean(
        database_url, client, task_queue, at9(29, 10) - timedelta(hours=1), at9(4, 11), late=LATE
    )


async def test_a_downstream_waits_for_the_upstream_slot_its_calendar_moved(
    db, database_url, client, task_queue, start_workers
):
    """Upstream: 09:00 New York on NYSE days, `following` (Thanksgiving's slot runs on
    Friday); downstream: 10:00 daily, the `latest` upstream slot. Thursday's downstream
    waits for the upstream's Thursday slot (by slot, not Wednesday's run before it), and
    is released when Friday's fire runs it; the audit, by its own mapping, is clean."""
    from tests.integration.test_dependencies import settled, waiting

    runtime.fresh_ids(db)
    since = lambda: at9(20, 11)  # noqa: E731 - the schedules' timing holds since then
    common = {"tenant": "acme", "kind": "test-noop", "timezone": "America/New_York"}
    common |= {"paused": True, "note": "test: backfilled runs only"}
    up = await tenants.create(
        database_url,
        common | {"name": "close", "cron": "0 9 * * *", "calendar": "NYSE"}
        | {"on_holiday": "following"},
        clock=since,
    )  # fmt: skip
    down = await tenants.create(
        database_url,
        common | {"name": "report", "cron": "0 10 * * *"}
        | {"depends_on": [{"schedule": "close", "slots": "latest", "within": "1h"}]},
        clock=since,
    )  # fmt: skip
    thursday = at9(26, 11) + timedelta(hours=1)
    start_workers(1)
    async with runtime.dispatcher(database_url, client, task_queue) as d:
        await tenants.backfill(database_url, up.schedule.id, at9(25, 11), thursday)
        await runtime.tick_all(d, datetime.now(UTC))
        await settled(db, up.schedule.ledger_name, at9(25, 11), "completed")  # Wednesday's
        await tenants.backfill(database_url, down.schedule.id, thursday, thursday + timedelta(1))
        await runtime.tick_all(d, datetime.now(UTC))
        await waiting(
            db, down.schedule.ledger_name, thursday, "schedule 'close' 2026-11-26 09:00 EST"
        )
        # Friday's fire runs Thursday's slot and Friday's.
        friday = at9(27, 11)
        await tenants.backfill(database_url, up.schedule.id, friday, friday + timedelta(hours=1))
        await runtime.tick_all(d, datetime.now(UTC))
        found = await settled(db, down.schedule.ledger_name, thursday, "completed")
        assert found["wait"] == "ready"
        # The downstream's Wednesday and Friday too, each on its own day's upstream slot.
        week = (at9(25, 11), friday + timedelta(hours=2))
        await tenants.backfill(database_url, down.schedule.id, *week)
        await runtime.tick_all(d, datetime.now(UTC))
        await runtime.settled(db, 6, timeout=120)
    ran = [r["scheduled_at"] for r in runtime.slot_rows(db, up.schedule.id)]
    assert ran == [at9(25, 11), at9(26, 11), at9(27, 11)]
    await runtime.audit_clean(
        database_url, client, task_queue, at9(25, 11), friday + timedelta(hours=2), late=LATE
    )
