"""`python -m worker migrate` creates the application role: it reads and writes the
application's rows and can change nothing else (real PostgreSQL)."""

from __future__ import annotations

import subprocess
import sys
import uuid

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from schedules.catalog.model import parse_catalog
from schedules.sync.apply import sync
from tests.helpers import ROOT, assert_eventually


def migrate(url: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "worker", "migrate"],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "DATABASE_URL": url, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_migrate_creates_a_least_privilege_application_role(postgres):
    url = postgres.create_database(f"app_role_{uuid.uuid4().hex[:8]}")
    role = f"app_{uuid.uuid4().hex[:8]}"
    env = {"APP_DATABASE_ROLE": role, "APP_DATABASE_PASSWORD": "s3cret-pw"}
    done = migrate(url, **env)
    assert done.returncode == 0, done.stderr
    assert f"application role {role}: created" in done.stdout
    assert "s3cret-pw" not in done.stdout + done.stderr
    again = migrate(url, **env)  # idempotent: the role is updated, nothing fails
    assert again.returncode == 0 and f"application role {role}: updated" in again.stdout

    app_url = make_conninfo(url, user=role, password="s3cret-pw")
    with psycopg.connect(app_url, autocommit=True) as conn:
        (superuser, createrole, createdb) = conn.execute(
            "SELECT rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
        assert (superuser, createrole, createdb) == (False, False, False)
        # Rows: what the workers do.
        conn.execute(
            "INSERT INTO job_executions (job_name, scheduled_at, status, origin, started_at) "
            "VALUES ('app-role-job', now(), 'running', 'direct', now())"
        )
        conn.execute(
            "UPDATE job_executions SET status = 'completed' WHERE job_name = 'app-role-job'"
        )
        conn.execute("DELETE FROM job_executions WHERE job_name = 'app-role-job'")
        # No DDL: only the migration step changes the schema.
        for statement in (
            "CREATE TABLE app_role_probe (id int)",
            "DROP TABLE job_executions",
            "ALTER TABLE job_executions ADD COLUMN probe int",
            "TRUNCATE job_executions",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
    assert conninfo_to_dict(app_url)["user"] == role


async def test_a_worker_connected_as_the_application_role_runs_a_job(
    client, settings, database_url, db, start_workers
):
    role = f"app_{uuid.uuid4().hex[:8]}"
    done = migrate(database_url, APP_DATABASE_ROLE=role, APP_DATABASE_PASSWORD="pw")
    assert done.returncode == 0, done.stderr
    app_url = make_conninfo(database_url, user=role, password="pw")
    # Migrating at start (the default) finds nothing to do, and needs no DDL for that.
    start_workers(1, DATABASE_URL=app_url)
    (job,) = parse_catalog(
        {"app-role-run": {"kind": "invoice-reminders", "cron": "0 3 * * *", "timezone": "UTC"}}
    )
    await sync(client, [job], settings.temporal_task_queue, prune=False)
    handle = client.get_schedule_handle(job.id)
    try:
        await handle.trigger()

        async def completed():
            rows = db.execute(
                "SELECT status FROM job_executions WHERE job_name = 'app-role-run'"
            ).fetchall()
            assert rows == [("completed",)], rows

        await assert_eventually(completed, timeout=60)
    finally:
        await handle.delete()
