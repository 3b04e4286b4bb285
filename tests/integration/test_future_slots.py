"""A slot whose time has not come runs nothing, however its run was started."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from temporalio.service import RPCError

from tests.helpers import assert_eventually
from tests.helpers.audit import audit_report
from tests.helpers.worker import schedules_cli
from tests.integration.jobs import (
    backfill_slots,
    executions,
    insert_invoices,
    invoice_job,
    outbox_count,
    registered,
)
from workflows import JobRunResult

LONDON = ZoneInfo("Europe/London")


def night(days_ahead: int) -> datetime:
    """02:30 London (the invoice job's time) `days_ahead` days from today."""
    day = datetime.now(LONDON).date() + timedelta(days=days_ahead)
    return (
        datetime.combine(day, datetime.min.time(), LONDON)
        .replace(hour=2, minute=30)
        .astimezone(UTC)
    )


async def test_a_backfill_of_a_future_night_reminds_nobody_and_leaves_the_slot_to_its_run(
    client, db, database_url, task_queue, start_workers
):
    # Due in 20 days: a run for the night 30 days ahead would find them overdue.
    insert_invoices(db, 30, due=date.today() + timedelta(days=20))
    start_workers(1)
    job = invoice_job()
    slot = night(days_ahead=30)
    async with registered(client, job, task_queue):
        # What `temporal schedule backfill` with a future range does: Temporal starts it now.
        await backfill_slots(client, job.id, slot, slot)
        run = client.get_workflow_handle(
            f"{job.id}-{slot:%Y-%m-%dT%H:%M:%SZ}", result_type=JobRunResult
        )

        async def finished():
            try:
                return await run.result()
            except RPCError as err:  # not started yet
                raise AssertionError(err.message) from None

        result = await assert_eventually(finished, timeout=60)
        assert result.outcome == "skipped" and result.origin == "backfill"
        assert result.reason.startswith(f"not run: slot {slot:%Y-%m-%dT%H:%M:%SZ} is after")
        assert result.execution_id is None and result.counts == {}
        # Nothing recorded for the slot (its own run at 02:30 that night still does the
        # work), nothing reminded, nothing in the outbox.
        assert executions(db, job.id) == []
        assert outbox_count(db) == 0
        reminded = db.execute("SELECT count(*) FROM invoices WHERE last_reminder_at IS NOT NULL")
        assert reminded.fetchone()[0] == 0
        # The audit knows the rule: a closed run of a future slot is rowless by design, no
        # missing_row (its slot is not due yet either).
        report = await audit_report(
            client, database_url, task_queue, [job], end=slot + timedelta(hours=1)
        )
        assert report.findings == [] and report.runs == 1


def test_the_backfill_command_refuses_a_range_that_ends_after_now(settings, tmp_path):
    path = tmp_path / "jobs.toml"
    path.write_text('[later]\nkind = "invoice-reminders"\ncron = "0 3 * * *"\ntimezone = "UTC"\n')
    ahead = (datetime.now(UTC) + timedelta(days=30)).date()
    for start, end, named in [
        (str(ahead), str(ahead + timedelta(days=1)), "--start"),
        ("2026-01-01", str(ahead), "--end"),
    ]:
        done = schedules_cli(
            settings, "backfill", "later", "--start", start, "--end", end, catalog=path
        )
        assert done.returncode == 2
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith(f"error: {named} ")
        assert "is after now" in line and "backfill runs past fire times only" in line
