"""A calendar edit never drops a decided slot (issue 36, item 4; docs/calendars.md, "An
edit never drops a decided slot"), on the real servers.

Weekdays at 09:00 New York on the NYSE with two extra holidays, Thursday 19 and Friday
20 November 2026, `following`: both slots are moved to Monday 23. On Friday at 10:00 the
operator removes the holidays and syncs. Under the new calendar both slots were due before
the edit, so neither timing would run them: the edit decides them by the job's catch-up
policy (`all`, `max_missed = 1`): Friday's runs at once, Thursday's is recorded as dropped.
`explain` and `audit` say so; a backfill of Thursday then runs it and the audit is clean.
"""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from schedules import tenants
from schedules.audit.history import Window
from schedules.audit.runtime import audit_runtime
from schedules.health.evidence import gather_evidence
from schedules.health.explain import explain, format_verdict
from schedules.record import DatabaseUnavailableError
from schedules.server.actions import backfill
from schedules.sync.apply import sync
from schedules.sync.plan import current_run
from schedules.sync.report import format_report
from tests.helpers import assert_eventually
from tests.helpers.audit import audit_report, audited
from tests.integration import runtime
from tests.integration.jobs import executions, registered
from tests.integration.test_calendars import calendar_job

NEW_YORK = ZoneInfo("America/New_York")
THURSDAY = datetime(2026, 11, 19, 9, tzinfo=NEW_YORK).astimezone(UTC)
FRIDAY = datetime(2026, 11, 20, 9, tzinfo=NEW_YORK).astimezone(UTC)
LATE = timedelta(days=3650)  # the clocks are in the past: runs start long after
MONDAY = datetime(2026, 11, 23, 9, tzinfo=NEW_YORK).astimezone(UTC)
# The audit's window: the edited week, an hour either side.
WINDOW = {"start": THURSDAY - timedelta(hours=1), "end": MONDAY + timedelta(hours=1)}
NOWHERE = "postgresql://nobody@127.0.0.1:1/nothing"  # refuses connections
EDIT = datetime(2026, 11, 20, 10, tzinfo=NEW_YORK).astimezone(UTC)  # Friday, 10:00


def weekday_job(job_id: str, **calendar):
    job = calendar_job(job_id, **calendar)
    return job.model_copy(update={"cron": "0 9 * * 1-5", "catchup": "all", "max_missed": 1})


async def served(client, job_id: str):
    """The timing the job's schedule on the server fires (its run input's)."""
    description = await client.get_schedule_handle(job_id).describe()
    return (await current_run(client, description)).timing


async def judged(client, database_url, task_queue, job, **found):
    """The audit of the two days, as `audited` asks it, finding exactly `found` (kind by
    slot); polled while runs settle."""

    async def exactly():
        report = await audit_report(client, database_url, task_queue, [job], **WINDOW)
        assert {(f.kind, f.slot) for f in report.findings} == set(found.items()), [
            (f.kind, f.job, f.slot, f.detail) for f in report.findings
        ]
        return report

    return await assert_eventually(exactly, timeout=30, interval=0.5)


async def test_an_edit_runs_or_records_the_moved_slots_it_strands(
    client, db, database_url, task_queue, start_workers
):
    job_id = f"calendar-edit-{uuid.uuid4().hex[:8]}"
    holidays = weekday_job(job_id, extra_holidays=[date(2026, 11, 19), date(2026, 11, 20)])
    assert holidays.timing.run_at(THURSDAY) == MONDAY == holidays.timing.run_at(FRIDAY)
    start_workers(1)
    async with registered(client, holidays, task_queue, now=datetime(2026, 11, 16, tzinfo=UTC)):
        edited = weekday_job(job_id)  # the extra holidays removed, on Friday at 10:00
        # PostgreSQL out of reach: the decisions cannot be recorded, so nothing is written.
        with pytest.raises(DatabaseUnavailableError, match="strands 2 slot"):
            await sync(client, [edited], task_queue, prune=False, now=EDIT, conninfo=NOWHERE)
        assert await served(client, job_id) == holidays.timing
        report = await sync(
            client, [edited], task_queue, prune=False, now=EDIT, conninfo=database_url
        )
        (change,) = report.changes
        decided = {
            d.strand.slot: (d.strand.was_due, d.strand.due, d.outcome) for d in change.edited
        }
        assert decided == {
            THURSDAY: (MONDAY, THURSDAY, "dropped"),  # beyond max_missed = 1
            FRIDAY: (MONDAY, FRIDAY, "run"),  # the newest missed run: started by the edit
        }

        printed = format_report(report, dry_run=False)
        assert (
            "    slot 2026-11-19T14:00:00Z (was due 2026-11-23T14:00:00Z): DROPPED: the new "
            "timing has it due 2026-11-19T14:00:00Z, before the edit; catch-up all runs the "
            "newest 1"
        ) in printed, printed
        assert (
            "    slot 2026-11-20T14:00:00Z (was due 2026-11-23T14:00:00Z): kept, run now" in printed
        )

        async def friday_ran():
            rows = executions(db, job_id)
            assert [(r["scheduled_at"], r["status"]) for r in rows] == [(FRIDAY, "completed")]

        await assert_eventually(friday_ran, timeout=60)

        async def verdict(slot):
            ev = await gather_evidence(
                client, database_url, edited, slot, EDIT + timedelta(hours=1), task_queue=task_queue
            )
            return explain(ev), format_verdict(ev, explain(ev))

        thursday, text = await verdict(THURSDAY)
        assert (thursday.ran, thursday.reason) == (False, "dropped_by_edit"), text
        assert text.startswith(
            f"{job_id} at 2026-11-19 09:00 EST (2026-11-19T14:00:00Z): dropped by the timing "
            "edit of 2026-11-20 10:00 EST (2026-11-20T15:00:00Z): it was due 2026-11-23 09:00"
        ), text
        assert f"backfill {job_id} --start 2026-11-19T14:00:00Z" in text
        friday, text = await verdict(FRIDAY)
        assert (friday.ran, friday.reason) == (True, "completed"), text
        assert "edit: kept (started then) by the timing edit of 2026-11-20 10:00" in text

        # The audit names exactly the dropped slot; the kept one ran.
        (finding,) = (await judged(client, database_url, task_queue, edited,
                                   dropped_by_edit=THURSDAY)).findings  # fmt: skip
        assert finding.witnesses["was_due_at"] == "2026-11-23T14:00:00Z"

        # What explain says to do: the backfill runs it, and the audit is clean.
        await backfill(client, job_id, THURSDAY, THURSDAY + timedelta(seconds=1))

        async def thursday_ran():
            rows = executions(db, job_id)
            assert [(r["scheduled_at"], r["status"]) for r in rows] == [
                (THURSDAY, "completed"),
                (FRIDAY, "completed"),
            ]

        await assert_eventually(thursday_ran, timeout=60)
        thursday, text = await verdict(THURSDAY)
        assert thursday.ran and "edit: dropped by the timing edit of" in text, text
        await audited(client, database_url, task_queue, [edited], **WINDOW)


THANKSGIVING = datetime(2026, 11, 26, tzinfo=NEW_YORK)  # NYSE closed
RT_EDIT = (THANKSGIVING + timedelta(hours=11)).astimezone(UTC)


@pytest.mark.parametrize("route", ["update", "apply"])
async def test_a_runtime_schedules_edit_runs_or_records_the_slots_it_strands(
    client, db, database_url, task_queue, start_workers, route
):
    """The same hole in a runtime schedule: 09:00 and 10:00 on NYSE days, `following`, so
    Thanksgiving's two slots wait for Friday; at 11:00 on Thanksgiving the calendar is
    cleared (by `update`, or by `apply` of the definition without it). Both slots were due
    before the edit under the new timing; catch-up `latest` runs the newest (10:00, handed
    to the dispatcher) and records 09:00 as dropped."""
    start_workers(1)
    runtime.fresh_ids(db)
    nine, ten = (
        (THANKSGIVING + timedelta(hours=h)).astimezone(UTC) for h in (9, 10)
    )  # fmt: skip
    plain = {
        "tenant": "acme",
        "name": "close",
        "kind": "test-noop",
        "cron": "0 9,10 * * 1-5",
        "timezone": "America/New_York",
        "catchup": "latest",
    }
    created = await tenants.create(
        database_url,
        plain | {"calendar": "NYSE", "on_holiday": "following"},
        by="test",
        clock=lambda: (THANKSGIVING + timedelta(hours=8)).astimezone(UTC),
    )
    schedule = created.schedule
    assert schedule.timing.run_at(nine) == nine + timedelta(days=1)
    if route == "update":
        await tenants.update(
            database_url, schedule.id, schedule.version, {"calendar": None}, by="test",
            clock=lambda: RT_EDIT,
        )  # fmt: skip
    else:
        applied = await tenants.apply(
            database_url, "acme", [plain], by="test", clock=lambda: RT_EDIT
        )
        assert list(applied.updated) == ["close"], applied
    async with runtime.dispatcher(database_url, client, task_queue) as d:
        await runtime.tick_all(d, RT_EDIT + timedelta(minutes=1))
        await runtime.settled(db, 1)
    rows = runtime.slot_rows(db, schedule.id)
    assert [(r["scheduled_at"], r["status"]) for r in rows] == [(ten, "completed")]

    later = lambda: RT_EDIT + timedelta(hours=1)  # noqa: E731
    dropped = await tenants.explain(database_url, schedule.id, nine, clock=later)
    assert dropped.verdict.startswith(
        "dropped by the timing edit of 2026-11-26T16:00:00Z: it was due 2026-11-27T14:00:00Z"
    ), dropped.verdict
    kept = await tenants.explain(database_url, schedule.id, ten, clock=later)
    assert kept.verdict.startswith("completed (backfill, attempt 1); kept (started then)"), (
        kept.verdict
    )

    window = Window(
        nine - timedelta(hours=1), RT_EDIT + timedelta(hours=1), datetime.now(UTC),
        timedelta(0), LATE, timedelta(minutes=15),
    )  # fmt: skip
    judged = await audit_runtime(database_url, client, window, task_queue=task_queue, timeout=30)
    assert [(f.kind, f.job, f.slot) for f in judged.findings] == [
        ("dropped_by_edit", f"rt-{schedule.id}", nine)
    ], [f.detail for f in judged.findings]
