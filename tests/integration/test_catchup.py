"""Missed runs after Temporal or the whole fleet was down, and the repeated fall-back hour."""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime, timedelta

from temporalio.client import (
    Client,
)

from core.payloads import data_converter
from devstack import TemporalDevServer, free_port
from schedules.catalog.model import parse_catalog
from schedules.sync.apply import sync
from tests.helpers import assert_eventually
from tests.helpers.audit import audit_report
from tests.integration.jobs import (
    both_0130s_fired,
    executions,
    fire_once,
    fired,
    grid_after,
    wait_until,
)
from workflows import ScheduledJobWorkflow


def jobs(**tables) -> dict:
    return {job.id: job for job in parse_catalog(tables)}


async def test_both_instants_of_a_repeated_0130_run_once(client, db, task_queue, start_workers):
    job = jobs(
        **{
            "fall-back": {
                "kind": "invoice-reminders",
                "cron": "30 1 * * *",
                "timezone": "America/New_York",
                "paused": True,  # only the backfill below runs it
                "note": "test: backfilled runs only",
            }
        }
    )["fall-back"]
    start_workers(1)
    async with both_0130s_fired(client, job, task_queue) as (first, second):

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


async def test_a_run_whose_workers_were_down_honours_its_starting_deadline(
    client, db, task_queue, start_workers
):
    # Registered while no worker polls: each job fires once, a workflow nobody runs yet.
    base = {"kind": "invoice-reminders", "interval": "4s", "timezone": "UTC", "catchup": "latest"}
    catalog = jobs(
        strict=base | {"starting_deadline": "2s"},  # a run starting 2 s late is skipped
        lenient=base,
    )
    fires = {}
    try:
        for job_id, job in catalog.items():
            _, fires[job_id] = await fire_once(client, job, task_queue)
        for job_id, fire in fires.items():
            await fired(client, job_id, fire)
        wait_until(max(fires.values()) + timedelta(seconds=5))  # the fleet is 5 s late
        start_workers(1)

        async def settled():
            found = {job_id: executions(db, job_id) for job_id in catalog}
            assert all(rows and rows[0]["status"] != "running" for rows in found.values())
            return found

        found = await assert_eventually(settled, timeout=60)
        (strict,), (lenient,) = found["strict"], found["lenient"]
        assert strict["scheduled_at"] == fires["strict"]
        assert lenient["scheduled_at"] == fires["lenient"]
        assert strict["status"] == "skipped"
        assert strict["error"].startswith("missed starting deadline: started")
        assert lenient["status"] == "completed"
        assert lenient["started_at"] - fires["lenient"] >= timedelta(seconds=5)
    finally:
        for job_id in catalog:
            await client.get_schedule_handle(job_id).delete()


async def test_catch_up_after_temporal_was_down_follows_each_policy(
    tmp_path, db, settings, start_workers
):
    """Temporal goes down before the jobs' first fire time and comes back four fire times
    later. Its own catch-up starts the earliest missed time, late; that run settles every
    fire time since then by its job's policy."""
    every = timedelta(seconds=4)
    policies = {"c-skip": {"catchup": "skip"}, "c-latest": {"catchup": "latest"}}
    policies["c-all"] = {"catchup": "all", "max_missed": 2}
    lead = 2 * every
    # The server must be down before the first fire time, so that no run of these jobs
    # exists (or is still open) across the downtime; on a machine slower than `lead`, try
    # again on a fresh server with twice the lead.
    for attempt in itertools.count():
        server = TemporalDevServer(
            free_port(), None, tmp_path / f"t{attempt}.db", tmp_path / f"t{attempt}.log"
        )
        server.start()
        try:
            await server.wait_ready()
            client = await Client.connect(server.address, data_converter=data_converter)
            first = grid_after(datetime.now(UTC) + lead, every)
            catalog = jobs(
                **{
                    name: {
                        "kind": "invoice-reminders",
                        "interval": f"{every.total_seconds():.0f}s",
                        "timezone": "UTC",
                        "catchup_window": "5m",
                        "start_at": (first - timedelta(seconds=1)).isoformat(),
                        **extra,
                    }
                    for name, extra in policies.items()
                }
            )
            await sync(client, catalog.values(), settings.temporal_task_queue)
        finally:
            server.stop()
        if datetime.now(UTC) < first:
            break
        lead *= 2

    try:
        downtime = [first + i * every for i in range(4)]
        wait_until(downtime[-1])
        server.start()
        await server.wait_ready()
        client = await Client.connect(server.address, data_converter=data_converter)
        start_workers(1, TEMPORAL_ADDRESS=server.address)

        async def catch_up(job_id: str):
            workflow_id = f"{job_id}-{first:%Y-%m-%dT%H:%M:%SZ}"
            # The restarted server's scheduler starts the run when its timer is processed,
            # which can be after the server answers; a result asked for before is not found.
            await fired(client, job_id, first, timeout=90)
            handle = client.get_workflow_handle_for(ScheduledJobWorkflow.run, workflow_id)
            result = await asyncio.wait_for(handle.result(), timeout=90)
            rows = [r for r in executions(db, job_id) if r["workflow_id"] == workflow_id]
            return result, rows

        for job_id in catalog:
            result, rows = await catch_up(job_id)
            # The catch-up run settled every fire time from the first one on, up to about
            # when it ran: at least the four of the downtime, with no gap.
            settled = [r["scheduled_at"] for r in rows]
            assert settled[:4] == downtime, job_id
            assert settled == [first + i * every for i in range(len(settled))], job_id
            assert result.scheduled_at == first and result.origin == "catch-up", job_id
            done = [r["scheduled_at"] for r in rows if r["status"] == "completed"]
            skipped = [r for r in rows if r["status"] == "skipped"]
            caught_up = [c.scheduled_at for c in result.caught_up if c.outcome == "completed"]
            if job_id == "c-skip":  # none of the missed times runs, its own neither
                assert result.outcome == "skipped" and done == [] and caught_up == []
                assert result.missed_skipped == len(settled) == len(skipped)
            elif job_id == "c-latest":  # exactly one: the most recent
                assert done == caught_up == [settled[-1]]
                assert result.outcome == "skipped" and result.missed_skipped == len(settled) - 1
            else:  # the two most recent, oldest first; the older ones are a recorded gap
                assert done == caught_up == settled[-2:]
                assert result.outcome == "skipped" and result.catchup_gap == len(settled) - 2
                gap = [r["scheduled_at"] for r in skipped if r["error"].startswith("catch-up gap")]
                assert gap == settled[:-2]

        # The audit judges the history from the first fire time to the last one each job's
        # catch-up settled: every fire time has its row, nothing else was run.
        end = min(max(r["scheduled_at"] for r in executions(db, j)) for j in catalog)
        report = await audit_report(
            client,
            settings.database_url.get_secret_value(),
            settings.temporal_task_queue,
            list(catalog.values()),
            start=first,
            end=end,
        )
        assert report.findings == []
        assert all(scope.due >= 3 for scope in report.scopes), report.scopes
    finally:
        server.stop()
