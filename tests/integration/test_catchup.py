"""Missed runs after Temporal or the whole fleet was down, and the repeated fall-back hour."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

from temporalio.client import (
    Client,
    ScheduleBackfill,
    ScheduleOverlapPolicy,
    ScheduleSpec,
)
from temporalio.contrib.pydantic import pydantic_data_converter

from devstack import TemporalDevServer, free_port
from schedules.catalog import parse_catalog
from schedules.compile import compile_schedule
from schedules.sync import sync
from tests.helpers import assert_eventually
from tests.integration.jobs import executions
from workflows import ScheduledJobWorkflow


def jobs(**tables) -> dict:
    return {job.id: job for job in parse_catalog(tables)}


def wait_until(instant: datetime) -> None:
    """Let wall-clock time pass (fire times must go by); not a guess at another process."""
    while datetime.now(UTC) < instant:
        time.sleep(0.05)


async def test_both_instants_of_a_repeated_0130_run_once(client, db, task_queue, start_workers):
    job = jobs(
        **{
            "fall-back": {
                "kind": "invoice-reminders",
                "cron": "30 1 * * *",
                "timezone": "America/New_York",
            }
        }
    )["fall-back"]
    # The schedule as Temporal alone would fire it: both 01:30s of 2025-11-02 (a past night:
    # a backfill of a future night runs nothing).
    schedule = compile_schedule(job, task_queue, datetime.now(UTC))
    schedule.spec = ScheduleSpec(cron_expressions=["30 1 * * *"], time_zone_name="America/New_York")
    await client.create_schedule(job.id, schedule)
    start_workers(1)
    first, second = (datetime(2025, 11, 2, h, 30, tzinfo=UTC) for h in (5, 6))
    try:
        await client.get_schedule_handle(job.id).backfill(
            ScheduleBackfill(
                start_at=first - timedelta(minutes=1),
                end_at=second + timedelta(minutes=1),
                overlap=ScheduleOverlapPolicy.BUFFER_ALL,
            )
        )

        async def both_settled():
            rows = executions(db, job.id)
            assert [r["scheduled_at"] for r in rows] == [first, second]
            assert [r["status"] for r in rows] == ["completed", "skipped"]
            return rows

        rows = await assert_eventually(both_settled, timeout=60)
        assert rows[1]["error"] == (
            "repeated local time 01:30 America/New_York (fall back): "
            "the job already ran at 2025-11-02T05:30:00Z"
        )
    finally:
        await client.get_schedule_handle(job.id).delete()


async def test_a_run_whose_workers_were_down_honours_its_starting_deadline(
    client, db, task_queue, start_workers
):
    every = 30
    # Register while no worker polls: `fire` starts a workflow nobody runs yet. The
    # schedules start just before it, so no earlier fire time muddles the record.
    now = datetime.now(UTC)
    fire = datetime.fromtimestamp((now.timestamp() // every + 1) * every, UTC)
    if fire - now < timedelta(seconds=8):  # room to register before it
        fire += timedelta(seconds=every)
    catalog = jobs(
        **{
            name: {
                "kind": "invoice-reminders",
                "interval": f"{every}s",
                "timezone": "UTC",
                "catchup": "latest",
                "start_at": (fire - timedelta(seconds=1)).isoformat(),
                **extra,
            }
            for name, extra in {"strict": {"starting_deadline": "2s"}, "lenient": {}}.items()
        }
    )
    await sync(client, catalog.values(), task_queue)
    try:
        wait_until(fire + timedelta(seconds=5))  # the fleet comes back 5 s late
        start_workers(1)

        async def settled():
            strict, lenient = executions(db, "strict"), executions(db, "lenient")
            assert strict and lenient
            assert strict[0]["status"] != "running" and lenient[0]["status"] != "running"
            return strict[0], lenient[0]

        strict, lenient = await assert_eventually(settled, timeout=60)
        assert strict["scheduled_at"] == lenient["scheduled_at"] == fire
        assert strict["status"] == "skipped"
        assert strict["error"].startswith("missed starting deadline: started")
        assert lenient["status"] == "completed"
        assert lenient["started_at"] - fire >= timedelta(seconds=5)
    finally:
        for job_id in catalog:
            await client.get_schedule_handle(job_id).delete()


async def test_catch_up_after_temporal_was_down_follows_each_policy(
    tmp_path, db, settings, start_workers
):
    every = 4
    server = TemporalDevServer(free_port(), None, tmp_path / "t.db", tmp_path / "t.log")
    server.start()
    await server.wait_ready()
    try:
        client = await Client.connect(server.address, data_converter=pydantic_data_converter)
        policies = {"c-skip": {"catchup": "skip"}, "c-latest": {"catchup": "latest"}}
        policies["c-all"] = {"catchup": "all", "max_missed": 2}
        catalog = jobs(
            **{
                name: {
                    "kind": "invoice-reminders",
                    "interval": f"{every}s",
                    "timezone": "UTC",
                    "catchup_window": "5m",
                    **extra,
                }
                for name, extra in policies.items()
            }
        )
        await sync(client, catalog.values(), settings.temporal_task_queue)
        start_workers(1, TEMPORAL_ADDRESS=server.address)

        async def ran_once_each():
            for name in catalog:
                assert any(r["status"] == "completed" for r in executions(db, name)), name

        await assert_eventually(ran_once_each, timeout=60)
        server.stop()
        stopped = datetime.now(UTC)
        wait_until(stopped + timedelta(seconds=5 * every))
        server.start()
        restarted = datetime.now(UTC)
        await server.wait_ready()
        client = await Client.connect(server.address, data_converter=pydantic_data_converter)

        # Every fire time during the downtime gets a row: run or skipped, never dropped.
        missed = [
            datetime.fromtimestamp(t, UTC)
            for t in range(
                int(stopped.timestamp()) // every * every + every, int(restarted.timestamp()), every
            )
        ]
        assert len(missed) >= 4

        async def all_settled():
            for name in catalog:
                rows = {r["scheduled_at"]: r for r in executions(db, name)}
                assert all(t in rows and rows[t]["status"] != "running" for t in missed), name
            return {name: executions(db, name) for name in catalog}

        settled = await assert_eventually(all_settled, timeout=90)
        first_missed = missed[0]

        def catch_up_result(name):
            row = next(r for r in settled[name] if r["scheduled_at"] == first_missed)
            handle = client.get_workflow_handle_for(ScheduledJobWorkflow.run, row["workflow_id"])
            return asyncio.wait_for(handle.result(), timeout=30)

        def ran(rows, since):
            return [
                r["scheduled_at"]
                for r in rows
                if r["scheduled_at"] >= since and r["status"] == "completed"
            ]

        # skip: none of the missed times ran.
        assert not [t for t in ran(settled["c-skip"], first_missed) if t in missed]
        skip_result = await catch_up_result("c-skip")
        assert skip_result.outcome == "skipped" and skip_result.missed_skipped >= len(missed)

        def completed_slots(result) -> list[datetime]:
            """The slots the catch-up run completed: its own and those it caught up on."""
            own = [result.scheduled_at] if result.outcome == "completed" else []
            return own + [c.scheduled_at for c in result.caught_up if c.outcome == "completed"]

        # latest: exactly one catch-up run, the most recent due time.
        latest = await catch_up_result("c-latest")
        (only,) = completed_slots(latest)
        assert only >= max(missed)
        assert latest.missed_skipped >= len(missed) - 1

        # all, max 2: the two most recent, oldest first; the older ones are a recorded gap.
        everything = await catch_up_result("c-all")
        runs = completed_slots(everything)
        assert len(runs) == 2 and runs == sorted(runs) and runs[-1] >= max(missed)
        assert everything.catchup_gap >= len(missed) - 2
        gap_rows = [r for r in settled["c-all"] if (r["error"] or "").startswith("catch-up gap")]
        assert len(gap_rows) == everything.catchup_gap
    finally:
        server.stop()
