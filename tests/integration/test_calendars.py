"""Business calendars on the real servers: what the Temporal server fires is the calendar's
intent, the runs happen at the adjusted times under the unadjusted slots, and a calendar
edited after its runs runs no period twice (the audit judges the history clean).

Thanksgiving week 2026 in New York, 09:00 daily, NYSE business days, `following`:
Thursday 26 November is closed, so its run moves to Friday 27; the weekend's to Monday 30.
"""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from schedules import tenants
from schedules.catalog.model import JobSpec, default_catalog, parse_each
from schedules.health.verify import verify_job
from schedules.server.times import server_times
from schedules.sync.apply import sync
from tests.helpers import ROOT, assert_eventually, run_python_walkthrough
from tests.helpers.audit import audited
from tests.integration import runtime
from tests.integration.jobs import FAST_RETRY, backfill_slots, executions, registered

NEW_YORK = ZoneInfo("America/New_York")
WEEK = (datetime(2026, 11, 23, tzinfo=NEW_YORK), datetime(2026, 12, 3, tzinfo=NEW_YORK))
LATE = timedelta(days=3650)  # the dispatcher's clock is in the past: runs start long after


def at9(day: int, month: int = 11) -> datetime:
    return datetime(2026, month, day, 9, tzinfo=NEW_YORK).astimezone(UTC)


def reconcile_table(**fields) -> dict:
    """A test-sized nightly-reconcile's catalog table with `fields`; paused: only backfills
    run it."""
    entry = default_catalog()["nightly-reconcile"].model_dump(
        mode="json",
        exclude={"id", "calendar", "on_holiday", "calendar_definition", "depends_on"},
    )
    return entry | {
        "paused": True,
        "note": "test: backfilled runs only",
        "retry": FAST_RETRY.model_dump(mode="json"),
        **fields,
    }


def calendar_job(job_id: str, **calendar) -> JobSpec:
    """A test-sized nightly-reconcile at 09:00 New York on the catalog calendar `exchange`
    (the NYSE and `calendar`'s extras), `following`; paused: only backfills run it."""
    table = reconcile_table(cron="0 9 * * *", calendar="exchange", on_holiday="following")
    jobs, problems = parse_each(
        {"calendars": {"exchange": {"base": "NYSE"} | calendar}, job_id: table}
    )
    assert not problems, problems
    return jobs[0]


async def backfill_and_settle(client, db, job: JobSpec, last: datetime, rows: int) -> list[dict]:
    """Backfill 25 November to the fire time `last`; wait for `rows` completed slots."""
    await backfill_slots(client, job.id, at9(25), last)

    async def settled():
        found = executions(db, job.id)
        assert len(found) == rows and all(r["status"] == "completed" for r in found), found
        return found

    return await assert_eventually(settled, timeout=90)


async def test_the_server_fires_the_adjusted_times_and_an_edit_runs_no_period_twice(
    client, db, database_url, task_queue, start_workers
):
    job_id = f"calendar-{uuid.uuid4().hex[:8]}"
    job = calendar_job(job_id)
    start_workers(1)
    # Synced as of after the week: its slots are older than the timing (backfills of
    # their own slots, no catch-up of anything else), and the spec covers 2026-2028.
    async with registered(client, job, task_queue, now=datetime(2026, 12, 10, tzinfo=UTC)):
        # The server's own fire times (ListScheduleMatchingTimes): the adjusted ones.
        served = await server_times(client, job.id, *WEEK)
        assert served == [at9(d) for d in (23, 24, 25, 27, 30)] + [at9(1, 12), at9(2, 12)]
        verdict = await verify_job(client, job, now=WEEK[0].astimezone(UTC), days=30)
        assert verdict.status == "ok", verdict
        assert verdict.calendar.startswith("exchange business days, following")
        assert (
            "moved from Thu 2026-11-26 09:00 to Fri 2026-11-27: exchange holiday "
            "(Thanksgiving Day)" in verdict.calendar_notes
        )

        # The runs: one per adjusted time, each working the slots moved there, under
        # their own (unadjusted) slots; the workflow is named after the adjusted time.
        rows = await backfill_and_settle(client, db, job, at9(30), rows=6)
        slots = {r["scheduled_at"]: r for r in rows}
        assert sorted(slots) == [at9(d) for d in range(25, 31)]
        ran_at = {s.day: r["workflow_id"].removeprefix(f"{job.id}-") for s, r in slots.items()}
        assert ran_at == {
            25: "2026-11-25T14:00:00Z",
            26: "2026-11-27T14:00:00Z",
            27: "2026-11-27T14:00:00Z",
            28: "2026-11-30T14:00:00Z",
            29: "2026-11-30T14:00:00Z",
            30: "2026-11-30T14:00:00Z",
        }

        # Edited after the fact: the exchange opens on Thanksgiving and closes on Monday
        # 30 November. Thursday now fires on its own and the weekend moves to Tuesday;
        # backfilled again, every period already run is a no-op, Tuesday's is new.
        edited = calendar_job(
            job_id, extra_working_days=[date(2026, 11, 26)], extra_holidays=[date(2026, 11, 30)]
        )
        await sync(
            client, [edited], task_queue, prune=False, now=datetime(2026, 12, 11, tzinfo=UTC)
        )
        served = await server_times(client, job.id, *WEEK)
        assert served == [at9(d) for d in (23, 24, 25, 26, 27)] + [at9(1, 12), at9(2, 12)]
        rows = await backfill_and_settle(client, db, edited, at9(1, 12), rows=7)
        again = {r["scheduled_at"]: r for r in rows}
        assert sorted(again) == [*sorted(slots), at9(1, 12)]
        for slot, row in slots.items():  # each period ran once: the same execution, kept
            assert (again[slot]["id"], again[slot]["attempt"]) == (row["id"], row["attempt"])
        assert sum(r["duplicate_runs"] for r in rows) == 6  # the re-fired runs' no-ops
        await audited(
            client,
            database_url,
            task_queue,
            [edited],
            start=at9(25) - timedelta(hours=1),  # what the backfills ran
            end=datetime(2026, 12, 2, tzinfo=NEW_YORK).astimezone(UTC),
            every_fire_time=True,
        )


async def test_the_dispatcher_runs_a_runtime_schedules_moved_slots_under_their_own_times(
    db, database_url, client, task_queue, start_workers
):
    """A runtime schedule on NYSE days, `following`, through Thanksgiving week: the
    dispatcher's clock is the test's, every 6 hours; each moved slot is decided when its
    fire time comes and recorded under its own (unadjusted) time; the audit is clean."""
    start_workers(1)
    runtime.fresh_ids(db)
    created = await tenants.create(
        database_url,
        {
            "tenant": "acme",
            "name": "settle",
            "kind": "test-noop",
            "cron": "0 9 * * *",
            "timezone": "America/New_York",
            "calendar": "NYSE",
            "on_holiday": "following",
            "catchup": "all",
            "max_missed": 10,
        },
        by="test",
        clock=lambda: WEEK[0].astimezone(UTC),
    )
    schedule = created.schedule
    assert schedule.next_fire_at == at9(23)
    async with runtime.dispatcher(database_url, client, task_queue) as d:
        now = WEEK[0].astimezone(UTC)
        while now < at9(1, 12) + timedelta(hours=6):
            await runtime.tick_all(d, now)
            now += timedelta(hours=6)
        await runtime.settled(db, 9, timeout=120)
    rows = runtime.slot_rows(db, schedule.id)
    assert [r["scheduled_at"] for r in rows] == [at9(d) for d in range(23, 31)] + [at9(1, 12)]
    started = {r["scheduled_at"].day: r["started_at"] for r in rows}
    assert started[26] >= at9(27) and started[28] >= at9(30)  # not before its fire time
    await runtime.audit_clean(
        database_url, client, task_queue, at9(23) - timedelta(hours=1), at9(2, 12), late=LATE
    )


def test_the_python_walkthrough_of_the_docs_runs_as_written(database_url):
    lines = run_python_walkthrough(ROOT / "docs" / "calendars.md", database_url)
    assert lines[0].startswith("2027-01-04 08:00:00+00:00 runs slot 2027-01-01 08:00:00+00:00")
    assert lines[0].endswith("US holiday (New Year's Day)")
    assert lines[2].startswith("moved from Fri 2027-01-01 03:00 to Mon 2027-01-04")
    assert lines[3].startswith("NYSE following holidays ")
    assert lines[4] == (
        "2026-11-25 22:00:00+00:00 moved from Thu 2026-11-26 17:00 to Wed 2026-11-25: "
        "NYSE holiday (Thanksgiving Day)"
    )  # a runtime schedule `preceding`: Thanksgiving runs the day before
    assert lines[5].startswith("schedule 'acme'/'x': calendar: unknown calendar 'NYSEE'")


def at16(day: int, month: int = 11, hour: int = 16) -> datetime:
    return datetime(2026, month, day, hour, tzinfo=NEW_YORK).astimezone(UTC)


async def test_the_server_fires_a_short_sessions_close_and_its_runs_keep_their_slots(
    client, db, database_url, task_queue, start_workers
):
    """`on_early_close = "close"`: the 16:00 New York job runs at the NYSE's 13:00 close on
    the day after Thanksgiving, with Thanksgiving's own slot moved there (`following`)."""
    job_id = f"close-{uuid.uuid4().hex[:8]}"
    table = reconcile_table(
        cron="0 16 * * *", calendar="NYSE", on_holiday="following", on_early_close="close"
    )
    (job,), problems = parse_each({job_id: table})
    assert not problems, problems
    start_workers(1)
    async with registered(client, job, task_queue, now=datetime(2026, 12, 10, tzinfo=UTC)):
        served = await server_times(client, job.id, WEEK[0], WEEK[1] + timedelta(hours=20))
        assert served == [at16(d) for d in (23, 24, 25)] + [
            at16(27, hour=13),
            at16(30),
            at16(1, 12),
            at16(2, 12),
            at16(3, 12),
        ]
        verdict = await verify_job(client, job, now=WEEK[0].astimezone(UTC), days=40)
        assert verdict.status == "ok", verdict
        assert (
            "moved from Thu 2026-11-26 16:00 to Fri 2026-11-27: NYSE holiday (Thanksgiving "
            "Day); runs at the close, 13:00, not 16:00: NYSE closes early on Fri 2026-11-27: "
            "Day after Thanksgiving Day (markets close at 1:00pm)" in verdict.calendar_notes
        )
        assert (
            "runs at the close, 13:00, not 16:00: NYSE closes early on Thu 2026-12-24: "
            "Christmas Eve (markets close at 1:00pm)" in verdict.calendar_notes
        )

        await backfill_slots(client, job.id, at16(25), at16(30))

        async def settled():
            found = executions(db, job.id)
            assert len(found) == 6 and all(r["status"] == "completed" for r in found), found
            return found

        rows = await assert_eventually(settled, timeout=90)
        ran_at = {
            r["scheduled_at"].astimezone(NEW_YORK).day: r["workflow_id"].removeprefix(f"{job.id}-")
            for r in rows
        }
        assert ran_at == {
            25: "2026-11-25T21:00:00Z",
            26: "2026-11-27T18:00:00Z",
            27: "2026-11-27T18:00:00Z",
            28: "2026-11-30T21:00:00Z",
            29: "2026-11-30T21:00:00Z",
            30: "2026-11-30T21:00:00Z",
        }
        await audited(
            client,
            database_url,
            task_queue,
            [job],
            start=at16(25) - timedelta(hours=1),
            end=at16(1, 12) - timedelta(hours=1),
            every_fire_time=True,
        )
