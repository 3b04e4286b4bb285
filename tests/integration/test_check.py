"""`python -m schedules check --json` against the real PostgreSQL and Temporal dev server."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from devstack import free_port
from schedules.catalog.compile import MANAGED_MEMO_KEY, MANAGED_MEMO_VALUE, compile_schedule
from schedules.catalog.model import load_catalog
from tests.helpers.worker import schedules_cli
from timing import Timing

CATALOG = """
[{job}]
description = "An hourly job for the health-check test."
kind = "invoice-reminders"
cron = "0 * * * *"
timezone = "UTC"

[{job}.params]
chunk_size = 100
"""


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    """A one-job catalog with a job id no other test uses."""
    path = tmp_path / "jobs.toml"
    path.write_text(CATALOG.format(job=f"check-{uuid.uuid4().hex[:10]}"))
    return path


def check(settings, catalog: Path, **env: str) -> tuple[int, dict]:
    done = schedules_cli(settings, "check", "--json", catalog=catalog, **env)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout)


def insert_runs(db: psycopg.Connection, job: str, fires: list[datetime], **overrides) -> None:
    """One completed 30-second run per fire time; `overrides` maps a fire time to columns."""
    rows = []
    for fire in fires:
        row = {
            "status": "completed",
            "started_at": fire + timedelta(seconds=1),
            "finished_at": fire + timedelta(seconds=31),
            "error": None,
        } | overrides.get(fire.isoformat(), {})
        rows.append((job, fire, row["status"], row["started_at"], row["finished_at"], row["error"]))
    with db.cursor() as cur:
        cur.executemany(
            "INSERT INTO job_executions"
            " (job_name, scheduled_at, status, origin, attempt, started_at, finished_at, error)"
            " VALUES (%s, %s, %s, 'scheduled', 1, %s, %s, %s)",
            rows,
        )


def hourly_fires(now: datetime) -> list[datetime]:
    """Every hourly fire time of the last two days, up to a minute ago."""
    return Timing(cron="0 * * * *").fire_times(now - timedelta(days=2), now - timedelta(minutes=1))


async def test_check_is_healthy_then_reports_every_alert_kind(
    client, db, settings, task_queue, catalog
):
    (job,) = load_catalog(catalog, engine=False)
    now = datetime.now(UTC)
    # Registered as by a sync two days ago: runs are expected from then on.
    await client.create_schedule(
        job.id,
        compile_schedule(job, task_queue, now - timedelta(days=2)),
        memo={MANAGED_MEMO_KEY: MANAGED_MEMO_VALUE},
    )
    try:
        fires = hourly_fires(now)
        insert_runs(db, job.id, fires)
        code, report = check(settings, catalog)
        assert (code, report["status"], report["alerts"]) == (0, "ok", []), report
        (status,) = report["jobs"]
        assert status["state"] == "active" and status["next_due_source"] == "temporal"
        assert status["next_due"] > now.isoformat()[:19]
        assert status["last_success"]["scheduled_at"] == fires[-1].isoformat().replace(
            "+00:00", "Z"
        )
        assert status["last_success"]["duration_seconds"] == 30.0

        # The latest due fire time never ran, the one before failed, the one before that was
        # slow; a catch-up gap was recorded just now; one outbox message is dead. Every fire
        # time from the missing one on has no row, so the result does not depend on whether
        # another fire time falls due while the check starts.
        due = [f for f in fires if f <= now - timedelta(minutes=16)]
        failed, slow = due[-2], due[-3]  # due[-1] is the missing one
        db.execute(
            "DELETE FROM job_executions WHERE job_name = %s AND scheduled_at >= %s",
            (job.id, slow),
        )
        insert_runs(
            db,
            job.id,
            [slow, failed],
            **{
                slow.isoformat(): {"finished_at": slow + timedelta(minutes=20)},
                failed.isoformat(): {"status": "failed", "error": "ledger locked"},
            },
        )
        db.execute(
            "INSERT INTO job_executions"
            " (job_name, scheduled_at, status, origin, error, finished_at)"
            " VALUES (%s, %s, 'skipped', 'catch-up', %s, now())",
            (job.id, now - timedelta(days=9, minutes=10), "catch-up gap: 40 missed, cap 3"),
        )
        db.execute(
            "INSERT INTO outbox_messages (type, payload, idempotency_key, dead_at, last_error)"
            " VALUES ('InvoiceReminder', '{}', 'dead-1', now(), 'SMTP 550')"
        )

        code, report = check(settings, catalog)
        assert code == 1, report
        assert report["status"] == "alert"
        assert {a["kind"] for a in report["alerts"]} == {
            "not_completed",
            "missed_runs",
            "last_run_failed",
            "slow_run",
            "catchup_gap",
            "dead_outbox",
        }
        by_kind = {a["kind"]: a for a in report["alerts"]}
        assert "ledger locked" in by_kind["last_run_failed"]["message"]
        assert by_kind["dead_outbox"]["job"] == "outbox"
        assert all(a["job"] == job.id for k, a in by_kind.items() if k != "dead_outbox")
    finally:
        await client.get_schedule_handle(job.id).delete()


def test_a_job_without_a_schedule_is_an_alert(db, settings, catalog):
    (job,) = load_catalog(catalog, engine=False)
    insert_runs(db, job.id, hourly_fires(datetime.now(UTC)))
    code, report = check(settings, catalog)
    assert code == 1, report
    assert [a["kind"] for a in report["alerts"]] == ["schedule_not_registered"]
    assert report["jobs"][0]["state"] == "not registered"
    assert report["jobs"][0]["next_due"] is None  # nothing will fire it


def test_database_unreachable_exits_2(settings, catalog):
    unreachable = f"postgresql://postgres@127.0.0.1:{free_port()}/x"
    code, report = check(settings, catalog, DATABASE_URL=unreachable)
    assert code == 2, report
    assert report["status"] == "unknown"
    assert report["errors"] and report["errors"][0].startswith("cannot read the database")
    assert report["jobs"][0]["last_run"] is None


def test_temporal_unreachable_exits_2_and_still_reports_the_database(db, settings, catalog):
    (job,) = load_catalog(catalog, engine=False)
    insert_runs(db, job.id, hourly_fires(datetime.now(UTC)))
    code, report = check(settings, catalog, TEMPORAL_ADDRESS="127.0.0.1:1")
    assert code == 2, report
    assert report["errors"] == [report["errors"][0]]
    assert report["errors"][0].startswith("cannot reach Temporal at 127.0.0.1:1")
    assert report["jobs"][0]["state"] == "unknown"
    assert report["jobs"][0]["last_run"]["status"] == "completed"
