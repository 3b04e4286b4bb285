"""`schedules audit` on real servers: clean histories give no finding, and every anomaly,
produced for real or seeded in the database after real runs, is named with its kind, slot
and witnesses (issue 18, the mutation suite)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta

import pytest
from psycopg_pool import AsyncConnectionPool

from activities.chunked import disable_fence_check, fenced
from activities.executions import ExecutionActivities, take_over
from activities.models import ClaimInput, ExecutionRef
from jobs.invoice_reminders.activities import remind_chunk, reminder_window
from schedules.audit import run_audit
from schedules.catalog import default_catalog
from schedules.check import ScheduleState
from schedules.sync import sync
from tests.conftest import ROOT, settings_env
from tests.helpers import assert_eventually
from tests.integration.jobs import (
    executions,
    grid_after,
    insert_invoices,
    invoice_job,
    runs_closed,
)

EVERY = timedelta(seconds=3)


async def audit(client, database_url, task_queue, jobs, **kwargs):
    kwargs.setdefault("settle", timedelta(0))
    return await run_audit(
        database_url, client, jobs, task_queue=task_queue, now=datetime.now(UTC), **kwargs
    )


def kinds(report) -> list[tuple[str, datetime | None]]:
    return [(f.kind, f.slot) for f in report.findings]


async def fire_n(client, job, task_queue, n: int):
    """Register `job` to fire `n` times, `EVERY` apart, from a time the server confirms."""
    lead = timedelta(seconds=2)
    while True:
        first = grid_after(datetime.now(UTC) + lead, EVERY)
        bounded = job.model_copy(
            update={
                "cron": None,
                "interval": EVERY,
                "start_at": first - timedelta(seconds=1),
                "end_at": first + EVERY * (n - 1) + timedelta(seconds=1),
                "paused": False,
                "note": "",
            }
        )
        await sync(client, [bounded], task_queue, prune=False)
        info = (await client.get_schedule_handle(job.id).describe()).info
        if first in info.next_action_times or first in {
            a.scheduled_at for a in info.recent_actions
        }:
            return bounded, [first + EVERY * i for i in range(n)]
        lead *= 2


async def completed_runs(client, db, job_id: str, slots: list[datetime]) -> None:
    async def all_completed():
        rows = executions(db, job_id)
        assert [r["scheduled_at"] for r in rows] == slots, rows
        assert {r["status"] for r in rows} == {"completed"}, rows

    await assert_eventually(all_completed, timeout=90)
    await runs_closed(client, job_id, slots)


async def test_a_clean_scheduled_history_gives_no_finding_and_seeded_anomalies_are_named(
    client, db, database_url, task_queue, start_workers
):
    insert_invoices(db, 20, due=date.today() - timedelta(days=10))
    start_workers(1)
    job, slots = await fire_n(client, invoice_job(), task_queue, 3)
    try:
        await completed_runs(client, db, job.id, slots)
        since = slots[0] - timedelta(minutes=1)
        clean = await audit(client, database_url, task_queue, [job], start=since)
        assert clean.findings == [] and clean.exit_code == 0
        assert clean.scopes[0].due == 3 and clean.rows == 3 and clean.runs == 3

        rows = {r["scheduled_at"]: r for r in executions(db, job.id)}
        first, second, third = (rows[s] for s in slots)
        forged = slots[0] + timedelta(seconds=1)
        (outbox_id,) = db.execute(
            "SELECT id FROM outbox_messages WHERE execution_id = %s ORDER BY id LIMIT 1",
            (first["id"],),
        ).fetchone()
        # The anomalies, seeded as a fault would leave them.
        db.execute("DELETE FROM job_executions WHERE id = %s", (second["id"],))
        db.execute(
            "INSERT INTO job_executions (job_name, scheduled_at, status, origin, finished_at)"
            " VALUES (%s, %s, 'completed', 'scheduled', now())",
            (job.id, forged),
        )
        db.execute("UPDATE job_executions SET status = 'running' WHERE id = %s", (third["id"],))
        db.execute(
            "INSERT INTO outbox_messages (type, payload, idempotency_key, execution_id, attempt)"
            " SELECT type, payload, idempotency_key || ':retry', execution_id, attempt + 1"
            " FROM outbox_messages WHERE id = %s",
            (outbox_id,),
        )
        db.execute(
            "UPDATE job_executions SET started_at = scheduled_at + interval '10 minutes'"
            " WHERE id = %s",
            (first["id"],),
        )

        found = await audit(client, database_url, task_queue, [job], start=since)
        assert found.exit_code == 1
        assert sorted(kinds(found), key=str) == sorted(
            [
                ("late", slots[0]),
                ("duplicated", slots[0]),
                ("unexpected", forged),
                ("lost", slots[1]),
                ("missing_row", slots[1]),
                ("orphan_running", slots[2]),
            ],
            key=str,
        )
        by_kind = {f.kind: f for f in found.findings}
        run_ids = {s: second["run_id"] for s in slots}
        assert by_kind["lost"].witnesses["run_id"] == run_ids[slots[1]]
        assert by_kind["lost"].witnesses["workflow_id"] == second["workflow_id"]
        assert by_kind["missing_row"].witnesses["run_id"] == second["run_id"]
        assert by_kind["orphan_running"].witnesses["run_id"] == third["run_id"]
        assert by_kind["orphan_running"].witnesses["run_status"] == "COMPLETED"
        assert by_kind["duplicated"].witnesses["execution_id"] == first["id"]
        assert str(outbox_id) in by_kind["duplicated"].witnesses["outbox_ids"]
        assert by_kind["late"].witnesses["execution_id"] == first["id"]

        # --from and --to bound what is judged: only the first slot's window.
        narrow = await audit(
            client, database_url, task_queue, [job], start=since, end=slots[0] + EVERY / 2
        )
        assert sorted(kinds(narrow), key=str) == sorted(
            [("late", slots[0]), ("duplicated", slots[0]), ("unexpected", forged)], key=str
        )
        # A settle longer than the history's age judges none of its fire times.
        settled = await audit(
            client, database_url, task_queue, [job], start=since, settle=timedelta(hours=1)
        )
        assert ("lost", slots[1]) not in kinds(settled)
    finally:
        await client.get_schedule_handle(job.id).delete()


SLOT = datetime(2026, 11, 20, 2, 30, tzinfo=UTC)  # 02:30 London: an invoice-reminders fire


@pytest.fixture
async def pool(database_url):
    async with AsyncConnectionPool(database_url, min_size=1, max_size=4, open=False) as pool:
        await pool.wait()
        yield pool


async def test_a_commit_by_an_attempt_whose_fence_check_is_off_is_a_stale_write(
    client, db, database_url, task_queue, pool
):
    job = default_catalog()["invoice-reminders"]
    insert_invoices(db, 5, due=date(2026, 11, 1))
    claim = await ExecutionActivities(pool).claim_execution(
        ClaimInput(
            job_name=job.id,
            scheduled_at=SLOT,
            trigger="schedule",
            origin="backfill",  # an older slot run now: not late
            workflow_id=f"{job.id}-2026-11-20T02:30:00Z",
            run_id="run-1",
        )
    )
    ref = ExecutionRef(execution_id=claim.execution_id, job_name=job.id, scheduled_at=SLOT)
    stale = await take_over(pool, claim.execution_id)
    current = await take_over(pool, claim.execution_id)
    window = reminder_window(job.id, SLOT, 7)
    disable_fence_check(frozenset({job.id}))  # the test-only hook: this kind is unfenced
    try:
        async with fenced(pool, stale, ref) as conn:
            await remind_chunk(conn, window, 0, 5)
    finally:
        disable_fence_check(frozenset())
    async with fenced(pool, current, ref) as conn:
        await current.complete(conn, {"counts": {}}, {"counts": {}})

    state = {job.id: ScheduleState(exists=True, managed=True, paused=False, timing_since=SLOT)}
    found = await audit(
        client,
        database_url,
        task_queue,
        [job],
        start=SLOT - timedelta(hours=1),
        end=SLOT + timedelta(hours=1),
        states=state,
    )
    assert kinds(found) == [("stale_write", SLOT)]
    (finding,) = found.findings
    outbox = [str(r[0]) for r in db.execute("SELECT id FROM outbox_messages ORDER BY id")]
    assert finding.witnesses["attempt"] == 1 and finding.witnesses["newer_attempt"] == 2
    assert finding.witnesses["execution_id"] == claim.execution_id
    assert sorted(finding.witnesses["outbox_ids"]) == sorted(outbox) and len(outbox) == 5


def cli(settings, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "schedules", "audit", *args],
        cwd=ROOT,
        env=settings_env(settings),
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_the_command_prints_json_lines_and_exits_by_what_it_found(settings, db):
    job = default_catalog()["nightly-reconcile"]
    db.execute(
        "INSERT INTO job_executions"
        " (job_name, scheduled_at, status, origin, started_at, finished_at)"
        " SELECT %s, t, 'completed', 'scheduled', t, t + interval '1 minute'"
        " FROM unnest(ARRAY['2026-11-20T07:00:00Z', '2026-11-20T07:30:00Z']::timestamptz[]) t",
        (job.id,),
    )
    args = ("--job", job.id, "--from", "2026-11-20T00:00:00Z", "--to", "2026-11-21T00:00:00Z")
    done = cli(settings, *args, "--json", "--settle", "0s")
    assert done.returncode == 1, done.stderr
    *lines, last = [json.loads(line) for line in done.stdout.splitlines()]
    # No schedule: judged up to its last row. 07:30Z is no fire time of 02:00 New York.
    assert [(f["kind"], f["slot"]["utc"]) for f in lines] == [
        ("unexpected", "2026-11-20T07:30:00Z")
    ]
    assert lines[0]["slot"]["local"] == "2026-11-20 02:30:00 EST"
    assert lines[0]["witnesses"]["origin"] == "scheduled"
    assert last["summary"]["findings"] == 1 and last["summary"]["by_kind"] == {"unexpected": 1}

    db.execute("DELETE FROM job_executions WHERE scheduled_at = '2026-11-20T07:30:00Z'")
    clean = cli(settings, *args, "--settle", "0s")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert clean.stdout.startswith("audit: 0 finding(s)")

    for bad, named in [
        (("--from", "yesterday"), "--from"),
        (("--settle", "soon"), "--settle"),
        (("--job", "no-such-job"), "no-such-job"),
        (("--from", "2026-11-21T00:00:00Z", "--to", "2026-11-20T00:00:00Z"), "--from"),
    ]:
        refused = cli(settings, *bad)
        assert refused.returncode == 2, refused
        assert refused.stdout == "" and len(refused.stderr.splitlines()) == 1, refused
        assert named in refused.stderr and "Traceback" not in refused.stderr


async def test_unreachable_servers_are_exit_2_in_one_line(settings):
    broken = settings.model_copy(update={"temporal_address": "127.0.0.1:1"})
    done = cli(broken, "--settle", "0s")
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done
    assert "127.0.0.1:1" in done.stderr
