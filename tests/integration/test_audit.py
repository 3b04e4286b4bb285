"""`schedules audit` on real servers: clean histories give no finding, and every anomaly,
produced for real or seeded in the database after real runs, is named with its kind, slot
and witnesses (issue 18, the mutation suite)."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, date, datetime, timedelta

from pydantic import SecretStr
from temporalio.client import ScheduleBackfill, ScheduleOverlapPolicy

from activities.chunks.chunked import disable_fence_check, fenced
from activities.claim.executions import ExecutionActivities, take_over
from activities.common.models import ClaimInput, ExecutionRef
from jobs.invoice_reminders.activities import remind_chunk, reminder_window
from schedules.audit import run_audit
from schedules.catalog.model import default_catalog, parse_catalog
from schedules.health.status import ScheduleState
from schedules.sync.apply import sync
from tests.helpers import assert_eventually
from tests.helpers.worker import schedules_cli
from tests.integration.jobs import (
    FAST_RETRY,
    both_0130s_fired,
    executions,
    fire_n,
    insert_invoices,
    invoice_job,
    registered,
    runs_closed,
    trigger_at,
)

EVERY = timedelta(seconds=3)


async def audit(client, database_url, task_queue, jobs, **kwargs):
    kwargs.setdefault("settle", timedelta(0))
    return await run_audit(
        database_url, client, jobs, task_queue=task_queue, now=datetime.now(UTC), **kwargs
    )


def kinds(report) -> list[tuple[str, datetime | None]]:
    return [(f.kind, f.slot) for f in report.findings]


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
    job, slots = await fire_n(client, invoice_job(), task_queue, 3, EVERY)
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
    done = schedules_cli(settings, "audit", *args, "--json", "--settle", "0s")
    assert done.returncode == 1, done.stderr
    *lines, last = [json.loads(line) for line in done.stdout.splitlines()]
    # No schedule: judged up to its last row. 07:30Z is no fire time of 02:00 New York.
    assert [(f["kind"], f["slot"]["utc"]) for f in lines] == [
        ("unexpected", "2026-11-20T07:30:00Z")
    ]
    assert lines[0]["slot"]["local"] == "2026-11-20 02:30:00 EST"
    assert lines[0]["witnesses"]["origin"] == "scheduled"
    assert last["summary"]["findings"] == 1 and last["summary"]["by_kind"] == {"unexpected": 1}
    # The report is recorded as printed (the dashboard's health page shows the newest).
    reported = "SELECT verdict, window_start, findings_total, findings, summary FROM audit_reports"
    ((verdict, start, total, stored, summary),) = db.execute(reported).fetchall()
    assert (verdict, start, total) == ("findings", datetime(2026, 11, 20, tzinfo=UTC), 1)
    assert stored == lines and summary == last["summary"]

    db.execute("DELETE FROM job_executions WHERE scheduled_at = '2026-11-20T07:30:00Z'")
    clean = schedules_cli(settings, "audit", *args, "--settle", "0s", "--pages-per-second", "500")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert clean.stdout.startswith("audit: 0 finding(s)")
    quiet = schedules_cli(settings, "audit", *args, "--settle", "0s", "--no-record")
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    newest = db.execute(f"{reported} ORDER BY id DESC").fetchall()
    assert [(v, n, f) for v, _, n, f, _ in newest] == [("clean", 0, []), ("findings", 1, lines)]
    # A report it cannot record is a warning: the verdict's exit code stands.
    db.execute("DROP TABLE audit_reports")
    unrecorded = schedules_cli(settings, "audit", *args, "--settle", "0s")
    assert unrecorded.returncode == 0 and unrecorded.stdout.startswith("audit: 0 finding(s)")
    (warning,) = unrecorded.stderr.splitlines()
    assert (
        warning.startswith("warning: the report was not recorded (") and "audit_reports" in warning
    )

    for bad, named in [
        (("--from", "yesterday"), "--from"),
        (("--settle", "soon"), "--settle"),
        (("--pages-per-second", "0"), "--pages-per-second"),
        (("--job", "no-such-job"), "no-such-job"),
        (("--from", "2026-11-21T00:00:00Z", "--to", "2026-11-20T00:00:00Z"), "--from"),
    ]:
        refused = schedules_cli(settings, "audit", *bad)
        assert refused.returncode == 2, refused
        assert refused.stdout == "" and len(refused.stderr.splitlines()) == 1, refused
        assert named in refused.stderr and "Traceback" not in refused.stderr


async def test_unreachable_servers_are_exit_2_in_one_line(settings):
    broken = settings.model_copy(update={"temporal_address": "127.0.0.1:1"})
    done = schedules_cli(broken, "audit", "--settle", "0s")
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done
    assert "127.0.0.1:1" in done.stderr and done.stdout == ""

    secret = "s3cret-pw"
    no_db = settings.model_copy(
        update={"database_url": SecretStr(f"postgresql://app:{secret}@127.0.0.1:1/app")}
    )
    done = schedules_cli(no_db, "audit", "--settle", "0s")
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done
    assert "cannot read" in done.stderr and secret not in done.stderr
    assert done.stdout == "" and "Traceback" not in done.stderr


async def test_a_run_terminated_in_the_middle_of_a_chunk_leaves_an_orphan_running_row(
    client, db, database_url, task_queue, start_workers, gate
):
    insert_invoices(db, 3000, due=date.today() - timedelta(days=10))
    start_workers(1, **gate.env)
    job = invoice_job(chunk_size=1000)
    async with registered(client, job, task_queue):
        await client.get_schedule_handle(job.id).trigger()
        await gate.reached()  # planned, before its first chunk
        gate.step()
        await gate.reached()  # one chunk committed, waiting before the second
        (row,) = executions(db, job.id)
        run = client.get_workflow_handle(row["workflow_id"], run_id=row["run_id"])
        await run.terminate(reason="test: terminated in the middle of a chunk")
        # The gate stays shut: the terminated run's activity, waiting at it, must not go on
        # to complete the row before its heartbeat learns of the termination.
        found = await audit(client, database_url, task_queue, [job], start=row["scheduled_at"])
    assert kinds(found) == [("orphan_running", row["scheduled_at"])]
    (finding,) = found.findings
    assert finding.witnesses["run_id"] == row["run_id"]
    assert finding.witnesses["run_status"] == "TERMINATED"
    assert finding.witnesses["origin"] == "manual"

    # Seeded after the run: the row marked completed although its run was terminated...
    slot = row["scheduled_at"]
    db.execute(
        "UPDATE job_executions SET status = 'completed', finished_at = now() WHERE id = %s",
        (row["id"],),
    )
    mismatch = await audit(client, database_url, task_queue, [job], start=slot)
    assert kinds(mismatch) == [("outcome_mismatch", slot)]
    (finding,) = mismatch.findings
    assert finding.witnesses["run_status"] == "TERMINATED" and finding.witnesses["status"] == (
        "completed"
    )
    assert (finding.witnesses["execution_id"], finding.witnesses["run_id"]) == (
        row["id"],
        row["run_id"],
    )
    # ... then gone: a closed run that left no row is missing one, whatever its outcome.
    db.execute("DELETE FROM job_executions WHERE id = %s", (row["id"],))
    rowless = await audit(client, database_url, task_queue, [job], start=slot)
    assert kinds(rowless) == [("missing_row", slot)]
    assert rowless.findings[0].witnesses == {
        "workflow_id": row["workflow_id"],
        "run_id": row["run_id"],
        "run_status": "TERMINATED",
    }
    gate.open()


async def test_the_repeated_fall_back_hour_is_judged_by_the_documented_rule(
    client, db, database_url, task_queue, start_workers
):
    """Temporal alone fires a 01:30 New York job twice on 2025-11-02; the engine skips the
    second: no finding. Had the second run done its work, it would be unexpected."""
    job = parse_catalog(
        {
            "fall-back": {
                "kind": "invoice-reminders",
                "cron": "30 1 * * *",
                "timezone": "America/New_York",
                "paused": True,
                "note": "test: backfilled runs only",
            }
        }
    )[0]
    start_workers(1)
    async with both_0130s_fired(client, job, task_queue) as (first, second):

        async def both_settled():
            rows = executions(db, job.id)
            assert [r["status"] for r in rows] == ["completed", "skipped"], rows

        await assert_eventually(both_settled, timeout=60)
        await runs_closed(client, job.id, [first, second])
        day = datetime(2025, 11, 2, 4, tzinfo=UTC)  # midnight in New York
        since = {job.id: ScheduleState(True, True, False, timing_since=day)}
        window = {"start": day, "end": day + timedelta(days=1)}
        clean = await audit(client, database_url, task_queue, [job], states=since, **window)
        assert clean.findings == [] and clean.scopes[0].due == 1  # the first 01:30 only

        db.execute(
            "UPDATE job_executions SET status = 'completed' WHERE scheduled_at = %s", (second,)
        )
        found = await audit(client, database_url, task_queue, [job], states=since, **window)
        assert kinds(found) == [("unexpected", second)]

        # A row failed whose run completed: Temporal and the ledger disagree on the outcome.
        db.execute("UPDATE job_executions SET status = 'failed' WHERE scheduled_at = %s", (first,))
        failed = await audit(client, database_url, task_queue, [job], states=since, **window)
        assert kinds(failed) == [("outcome_mismatch", first), ("unexpected", second)]
        assert failed.findings[0].witnesses["run_status"] == "COMPLETED"
        assert failed.findings[0].witnesses["workflow_id"] == f"{job.id}-2025-11-02T05:30:00Z"


def _backfill(start: datetime, end: datetime) -> ScheduleBackfill:
    return ScheduleBackfill(start_at=start, end_at=end, overlap=ScheduleOverlapPolicy.ALLOW_ALL)


async def test_clean_backfills_across_dst_days_and_a_manual_trigger_give_no_finding(
    client, db, database_url, task_queue, start_workers
):
    """Reference jobs backfilled over the spring-forward and fall-back days of New York and
    London (past days: the clock is a parameter through the schedule state given to the
    audit), and a manual trigger at a time that is no fire time: 0 findings."""
    catalog = default_catalog()
    quiet = {"paused": True, "retry": FAST_RETRY, "note": "test: backfilled runs only"}
    quiet |= {"depends_on": []}  # no upstream here: test_dependencies.py runs one
    reconcile = catalog["nightly-reconcile"].model_copy(update=quiet)  # 02:00 New York
    reminders = invoice_job()  # 02:30 London
    hourly = invoice_job().model_copy(update={"id": "hourly-london", "cron": "0 * * * *"})
    days = {
        reconcile.id: (datetime(2026, 3, 7, 12, tzinfo=UTC), datetime(2026, 3, 9, 12, tzinfo=UTC)),
        reminders.id: (datetime(2025, 10, 25, 12, tzinfo=UTC), datetime(2025, 10, 27, tzinfo=UTC)),
        hourly.id: (datetime(2026, 3, 29, tzinfo=UTC), datetime(2026, 3, 29, 22, 30, tzinfo=UTC)),
    }
    start_workers(2)
    jobs = [reconcile, reminders, hourly]
    try:
        await sync(client, jobs, task_queue, prune=False, now=datetime(2025, 10, 1, tzinfo=UTC))
        for job in jobs:
            await client.get_schedule_handle(job.id).backfill(_backfill(*days[job.id]))
        expected = {reconcile.id: 2, reminders.id: 1, hourly.id: 23}  # 03-29: 23 hours

        async def backfilled():
            for job in jobs:
                assert len(executions(db, job.id)) >= expected[job.id], job.id

        # The trigger once the backfill's runs have started: patched right behind the
        # backfill, it can make the dev server (1.32) drop the backfill of a new schedule.
        await assert_eventually(backfilled, timeout=180)
        await trigger_at(client, reminders.id, datetime(2025, 10, 26, 9, 17, tzinfo=UTC))

        async def all_settled():
            for job in jobs:
                rows = executions(db, job.id)
                assert len(rows) == expected[job.id] + (job is reminders), (job.id, rows)
                assert {r["status"] for r in rows} == {"completed"}, rows

        await assert_eventually(all_settled, timeout=180)
        for job in jobs:
            await runs_closed(client, job.id, [r["scheduled_at"] for r in executions(db, job.id)])
        states = {
            job.id: ScheduleState(True, True, False, timing_since=days[job.id][0]) for job in jobs
        }
        report = await audit(
            client,
            database_url,
            task_queue,
            jobs,
            start=datetime(2025, 10, 1, tzinfo=UTC),
            end=datetime(2026, 4, 1, tzinfo=UTC),
            states=states,
        )
        assert report.findings == []
        assert {s.job.id: s.due for s in report.scopes} == expected
        # The spring-forward 02:00 in New York ran at 03:00 EDT: the audit's fire time.
        slots = [r["scheduled_at"] for r in executions(db, reconcile.id)]
        assert datetime(2026, 3, 8, 7, tzinfo=UTC) in slots
    finally:
        for job in jobs:
            await client.get_schedule_handle(job.id).delete()


async def test_effects_of_failed_or_undone_work_are_orphan_effects(
    client, db, database_url, task_queue
):
    """Seeded after the fact, as the fault campaign found them: a billing charge the
    provider made on an invoice that ended Void (the kind's own query), and outbox rows
    of an execution that ended failed."""
    billing = default_catalog()["monthly-billing"]  # 03:00 New York on the 1st
    reminders = default_catalog()["invoice-reminders"]
    slot = datetime(2026, 10, 1, 7, tzinfo=UTC)
    (billed,) = db.execute(
        "INSERT INTO job_executions (job_name, scheduled_at, status, origin, started_at)"
        " VALUES (%s, %s, 'compensated', 'scheduled', %s) RETURNING id",
        (billing.id, slot, slot),
    ).fetchone()
    db.execute(
        "INSERT INTO billing_runs (job_name, month, execution_id, status)"
        " VALUES (%s, '2026-09-01', %s, 'reopened')",
        (billing.id, billed),
    )
    db.execute(
        "INSERT INTO subscriptions (id, customer_email, plan, amount_cents, started_on,"
        " payment_method) VALUES (1, 'c@example.com', 'pro', 900, '2026-01-01', 'pm_1')"
    )
    db.execute(
        "INSERT INTO invoices (id, invoice_number, customer_email, status, due_date,"
        " subscription_id, billing_month, billing_job)"
        " VALUES (1, 'B-1', 'c@example.com', 'Void', '2026-10-15', 1, '2026-09-01', %s)",
        (billing.id,),
    )
    db.execute(
        "INSERT INTO charges (invoice_id, billing_month, status, amount_cents,"
        " provider_charge_id) VALUES (1, '2026-09-01', 'charged', 900, 'ch_1')"
    )
    r_slot = datetime(2026, 11, 20, 2, 30, tzinfo=UTC)
    (failed,) = db.execute(
        "INSERT INTO job_executions (job_name, scheduled_at, status, origin, started_at)"
        " VALUES (%s, %s, 'failed', 'scheduled', %s) RETURNING id",
        (reminders.id, r_slot, r_slot),
    ).fetchone()
    (outbox_id,) = db.execute(
        "INSERT INTO outbox_messages (type, payload, idempotency_key, execution_id, attempt)"
        " VALUES ('InvoiceReminder', '{}', 'k1', %s, 1) RETURNING id",
        (failed,),
    ).fetchone()
    # Paused (no pause recorded): judged up to their last recorded slot; billing's next
    # night since is reported inconclusive, neither lost nor silently excused.
    states = {
        billing.id: ScheduleState(True, True, True, timing_since=slot),
        reminders.id: ScheduleState(True, True, True, timing_since=r_slot),
    }
    found = await audit(
        client,
        database_url,
        task_queue,
        [billing, reminders],
        start=datetime(2026, 9, 1, tzinfo=UTC),
        end=r_slot + timedelta(minutes=1),
        states=states,
    )
    november = datetime(2026, 11, 1, 8, tzinfo=UTC)  # 03:00 EST, the day New York falls back
    assert kinds(found) == [
        ("orphan_effect", r_slot),
        ("orphan_effect", slot),
        ("inconclusive", november),
    ]
    assert found.exit_code == 1 and found.findings[-1].witnesses["fire_times"] == 1
    by_job = {f.job: f for f in found.findings if f.kind == "orphan_effect"}
    assert by_job[reminders.id].witnesses["outbox_ids"] == [str(outbox_id)]
    assert by_job[billing.id].witnesses["invoice_number"] == "B-1"
    assert by_job[billing.id].witnesses["execution_id"] == billed
    assert "ended Void" in by_job[billing.id].detail


async def test_a_pause_and_a_timing_changed_mid_way_give_no_finding(
    client, db, database_url, task_queue, start_workers
):
    start_workers(1)
    job, before = await fire_n(client, invoice_job(), task_queue, 2, EVERY)
    try:
        await completed_runs(client, db, job.id, before)
        await client.get_schedule_handle(job.id).pause(note="test: paused")
        since = before[0] - timedelta(minutes=1)
        paused = await audit(client, database_url, task_queue, [job], start=since)
        assert paused.findings == [] and paused.scopes[0].due == 2
        assert "paused" in paused.scopes[0].note

        # Resumed, the catalog changes the job's timing: a new interval, later bounds. The
        # rows of the old timing are before the new one's timing_since: not judged by it.
        await client.get_schedule_handle(job.id).unpause(note="test: resumed")
        changed, after = await fire_n(client, job, task_queue, 2, every=timedelta(seconds=4))
        await completed_runs(client, db, job.id, before + after)
        report = await audit(client, database_url, task_queue, [changed], start=since)
        assert report.findings == [] and report.scopes[0].due == 2
        assert report.rows == 4
    finally:
        await client.get_schedule_handle(job.id).delete()


async def test_fire_times_under_a_recorded_pause_are_not_due_and_unrecorded_ones_are_lost(
    client, db, database_url, task_queue, start_workers
):
    """An hourly job ran 00:00-02:00 and 06:00-08:00 of a past day (backfilled, real runs)
    and not in between: with no pause recorded each hour between is lost; with the pause
    recorded over them, as `schedules pause` / `resume` leave it, the history is clean."""
    job = invoice_job().model_copy(
        update={"id": "paused-hours", "cron": "0 * * * *", "timezone": "UTC"}
    )
    day = datetime(2026, 6, 10, tzinfo=UTC)
    ran = [day + timedelta(hours=h) for h in (0, 1, 2, 6, 7, 8)]
    gap = [day + timedelta(hours=h) for h in (3, 4, 5)]
    start_workers(1)
    async with registered(client, job, task_queue, now=day - timedelta(days=1)):
        # Both windows in one patch: a second backfill patched right behind the first made
        # the dev server (1.32) drop the first on a new schedule (CI at ef65e1a: 00:00-02:00
        # never ran), as a trigger right behind one does (test_clean_backfills_..., above).
        await client.get_schedule_handle(job.id).backfill(
            *(
                _backfill(first - timedelta(minutes=1), last + EVERY)
                for first, last in ((ran[0], ran[2]), (ran[3], ran[5]))
            )
        )
        await completed_runs(client, db, job.id, ran)
        since = {job.id: ScheduleState(True, True, False, timing_since=day)}
        window = {"start": day, "end": day + timedelta(hours=9), "states": since}

        unrecorded = await audit(client, database_url, task_queue, [job], **window)
        assert kinds(unrecorded) == [("lost", t) for t in gap]
        assert unrecorded.findings[0].witnesses == {"workflow_id": f"{job.id}-2026-06-10T03:00:00Z"}

        db.execute(
            "INSERT INTO schedule_pauses (job_name, paused_at, resumed_at, paused_by, note)"
            " VALUES (%s, %s, %s, 'pause', 'test: held three hours')",
            (job.id, gap[0] - timedelta(minutes=20), gap[-1] + timedelta(minutes=20)),
        )
        recorded = await audit(client, database_url, task_queue, [job], **window)
        assert recorded.findings == [] and recorded.scopes[0].due == len(ran)


def _pauses(db, job_id: str) -> list[tuple]:
    return db.execute(
        "SELECT paused_by, paused_at, resumed_at, note FROM schedule_pauses"
        " WHERE job_name = %s ORDER BY id",
        (job_id,),
    ).fetchall()


async def test_sync_pause_and_resume_record_the_pauses_the_audit_excuses(
    settings, client, db, database_url, task_queue, tmp_path
):
    """The tooling records each pause: sync applying the catalog's `paused = true`, then
    `resume` and `pause`; a job paused now under a recorded pause is judged to the end of
    the window (its fire times since excused), not only up to its last recorded slot."""
    path = tmp_path / "jobs.toml"
    path.write_text(
        '[held]\nkind = "invoice-reminders"\ndescription = "audit test"\n'
        'cron = "30 2 * * *"\ntimezone = "Europe/London"\npaused = true\n'
        'note = "held by the catalog"\n'
    )

    def schedules(*args: str) -> subprocess.CompletedProcess:
        done = schedules_cli(settings, *args, catalog=path)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "not recorded" not in done.stderr, done.stderr
        return done

    before = datetime.now(UTC)
    schedules("sync", "--no-prune")
    handle = client.get_schedule_handle("held")
    try:
        created = (await handle.describe()).info.created_at
        ((by, paused_at, resumed_at, _),) = _pauses(db, "held")
        assert by == "sync" and before <= paused_at <= created and resumed_at is None

        schedules("resume", "held")
        unpaused = datetime.now(UTC)
        ((_, _, resumed_at, _),) = _pauses(db, "held")
        assert paused_at <= resumed_at <= unpaused
        assert not (await handle.describe()).schedule.state.paused

        schedules("pause", "held", "--note", "ledger migration")
        assert _pauses(db, "held")[1][0::3] == ("pause", "ledger migration")
        assert _pauses(db, "held")[1][2] is None

        (job,) = parse_catalog(
            {
                "held": {
                    "kind": "invoice-reminders",
                    "cron": "30 2 * * *",
                    "timezone": "Europe/London",
                }
            }
        )
        report = await audit(client, database_url, task_queue, [job])
        assert report.findings == []
        assert report.scopes[0].note.startswith("paused now (recorded)")
    finally:
        await handle.delete()
