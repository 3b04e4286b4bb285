"""The invoice-reminders job end to end: real schedule, real worker processes, real Postgres."""

from __future__ import annotations

import asyncio
import subprocess
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError

from devstack.temporal import temporal_binary
from schedules.catalog.compile import job_run
from tests.helpers import assert_eventually
from tests.helpers.audit import audited
from tests.integration.jobs import (
    backfill_slots,
    backfilled_again,
    executions,
    insert_invoices,
    invoice_job,
    outbox_count,
    registered,
    runs_closed,
    runs_completed,
)
from workflows import ScheduledJobWorkflow

LONDON = ZoneInfo("Europe/London")


def nightly_slots(days_ago: int, n: int) -> list[datetime]:
    """`n` consecutive 02:30 Europe/London fire times, the first `days_ago` days back."""
    today = datetime.now(LONDON).date()
    return [
        datetime.combine(today - timedelta(days=days_ago - i), datetime.min.time(), LONDON)
        .replace(hour=2, minute=30)
        .astimezone(UTC)
        for i in range(n)
    ]


async def backfill(client, job_id: str, slots: list[datetime]) -> None:
    await backfill_slots(client, job_id, slots[0], slots[-1])


async def test_backfill_on_three_worker_processes_runs_each_slot_once(
    client, db, database_url, task_queue, start_workers
):
    slots = nightly_slots(days_ago=20, n=5)
    # Invoices falling due across the backfilled nights: each night reminds the new ones.
    first_day = slots[0].date()
    for i in range(5):
        insert_invoices(db, 40, due=first_day + timedelta(days=i - 1), start=1 + 40 * i)
    insert_invoices(db, 30, due=date.today() + timedelta(days=30), start=1000)  # not yet due
    db.execute("UPDATE invoices SET status = 'Paid' WHERE id % 10 = 0")
    expected = db.execute(
        "SELECT count(*) FROM invoices WHERE status = 'Unpaid' AND due_date < %s",
        (slots[-1].date(),),
    ).fetchone()[0]

    start_workers(3)
    job = invoice_job()
    async with registered(client, job, task_queue):
        await backfill(client, job.id, slots)

        rows = await runs_completed(db, job.id, slots, timeout=60)
        assert sum(r["result"]["counts"]["reminded"] for r in rows) == expected
        assert outbox_count(db) == expected
        # Each reminded invoice has exactly one message, and no invoice was reminded twice.
        per_invoice = db.execute(
            "SELECT payload->>'invoice_number', count(*) FROM outbox_messages GROUP BY 1"
        ).fetchall()
        assert len(per_invoice) == expected
        assert {n for _, n in per_invoice} == {1}
        assert (
            db.execute(
                "SELECT count(*) FROM invoices WHERE last_reminder_at IS NOT NULL"
            ).fetchone()[0]
            == expected
        )

        # b) The same five slots again: no new effects, each run recorded as already done.
        again = await backfilled_again(client, db, job.id, slots)
        assert [r["status"] for r in again] == ["completed"] * 5
        assert [r["result"] for r in again] == [r["result"] for r in rows]
        assert outbox_count(db) == expected

        async def all_runs_finished():
            results = []
            query = f'TemporalScheduledById = "{job.id}" AND TaskQueue = "{task_queue}"'
            async for wf in client.list_workflows(query):
                handle = client.get_workflow_handle_for(
                    ScheduledJobWorkflow.run, wf.id, run_id=wf.run_id
                )
                results.append(await asyncio.wait_for(handle.result(), timeout=30))
            assert len(results) == 10
            return results

        results = await assert_eventually(all_runs_finished, timeout=30)
        outcomes = sorted(r.outcome for r in results)
        assert outcomes == ["already_completed"] * 5 + ["completed"] * 5
        # The five nights and their no-op re-runs, judged by the audit: every night once.
        window = {"start": slots[0], "end": slots[-1] + timedelta(seconds=1)}
        await audited(client, database_url, task_queue, [job], **window, every_fire_time=True)


async def test_cli_trigger_records_one_run_at_the_trigger_time(
    client, db, database_url, task_queue, start_workers, temporal
):
    insert_invoices(db, 25, due=date.today() - timedelta(days=3))
    start_workers(1)
    job = invoice_job()
    async with registered(client, job, task_queue):
        before = datetime.now(UTC).replace(microsecond=0)
        subprocess.run(
            [
                temporal_binary(),
                "schedule",
                "trigger",
                "--schedule-id",
                job.id,
                "--address",
                temporal.address,
            ],
            check=True,
            capture_output=True,
        )

        async def one_completed():
            rows = executions(db, job.id)
            assert len(rows) == 1 and rows[0]["status"] == "completed"
            return rows[0]

        row = await assert_eventually(one_completed, timeout=60)
        # The server takes the trigger's time when it handles it, after the CLI returned
        # perhaps, and before the run it started claimed the slot.
        assert before <= row["scheduled_at"] <= row["started_at"]
        assert row["origin"] == "manual"  # a trigger, in the record as in the run's result
        assert row["workflow_id"] == f"{job.id}-{row['scheduled_at']:%Y-%m-%dT%H:%M:%SZ}"
        assert row["result"]["counts"]["reminded"] == 25
        assert outbox_count(db) == 25
        await runs_closed(client, job.id, [row["scheduled_at"]])
        await audited(client, database_url, task_queue, [job], start=before)


async def test_a_workflow_started_without_a_schedule_uses_its_start_time(
    client, db, task_queue, start_workers
):
    insert_invoices(db, 10, due=date.today() - timedelta(days=2))
    start_workers(1)
    handle = await client.start_workflow(
        ScheduledJobWorkflow.run,
        job_run(invoice_job()),
        id=f"invoice-reminders-by-hand-{task_queue}",
        task_queue=task_queue,
    )
    result = await handle.result()
    # Its slot is its workflow's clock at its first task (`workflow.info().start_time`: the
    # first WorkflowTaskStarted event's time), which a loaded server puts after the start.
    history = await handle.fetch_history()
    first_task = next(
        e.event_time.ToDatetime(UTC)
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED
    )
    assert result.outcome == "completed" and result.origin == "direct"
    assert result.scheduled_at == first_task.replace(microsecond=0)
    (row,) = executions(db, "invoice-reminders")
    assert row["origin"] == "direct" and row["scheduled_at"] == result.scheduled_at
    assert result.counts == {"reminded": 10, "queued": 10, "chunks": 1}


async def test_a_failing_run_is_recorded_failed_and_fails_the_workflow(
    client, db, task_queue, start_workers
):
    start_workers(1)
    broken = invoice_job(chunk_size=0)  # rejected by the job's params model
    handle = await client.start_workflow(
        ScheduledJobWorkflow.run,
        job_run(broken),
        id=f"invoice-reminders-broken-{task_queue}",
        task_queue=task_queue,
    )
    with pytest.raises(WorkflowFailureError) as err:
        await handle.result()
    assert "invalid params" in str(err.value.cause)
    (row,) = executions(db, "invoice-reminders")
    assert row["status"] == "failed"
    assert "chunk_size" in row["error"] and row["finished_at"] is not None
    assert outbox_count(db) == 0


async def test_the_temporal_ui_shows_what_each_run_is_and_did(
    client, db, task_queue, start_workers
):
    insert_invoices(db, 12, due=date.today() - timedelta(days=3))
    start_workers(1)
    job = invoice_job()
    async with registered(client, job, task_queue):
        action = (await client.get_schedule_handle(job.id).describe()).schedule.action
        summary, details = await client.data_converter.decode(
            [action.static_summary, action.static_details], [str, str]
        )
        assert summary == f"{job.id}: {job.description}"
        assert f"owner: {job.owner}" in details

        await client.get_schedule_handle(job.id).trigger()

        async def one_completed():
            rows = executions(db, job.id)
            assert len(rows) == 1 and rows[0]["status"] == "completed"
            return rows[0]

        row = await assert_eventually(one_completed, timeout=60)
        handle = client.get_workflow_handle_for(ScheduledJobWorkflow.run, row["workflow_id"])
        result = await asyncio.wait_for(handle.result(), timeout=30)
        assert result.origin == "manual"  # a trigger: off the cron's grid
        description = await handle.describe()
        assert await description.static_summary() == f"{job.id}: {job.description}"
        metadata = await handle.query("__temporal_workflow_metadata")
        local = row["scheduled_at"].astimezone(LONDON)
        assert metadata.current_details.startswith(
            f"**{job.id}** · {local:%Y-%m-%d %H:%M} {local.tzname()} · manual"
        )
        assert "completed: reminded 12, queued 12, chunks 1" in metadata.current_details
