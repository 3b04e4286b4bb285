"""This release against the next release's expanded schema (docs/deploy.md, "Migrations a
previous release can run against"): during a rolling deploy, and after a rollback, workers of
release N run against a database that release N+1 has migrated. N+1's migrations may only
expand, so N must keep working when every table it uses has grown columns (a nullable one
and one with a default), new tables and indexes exist, and `schema_migrations` records a
version N does not know. Here this release plays N: the expansion is applied to a migrated
database, then workers start (migrating on start, as deployed), run a chunked job with its
outbox, a no-op re-run, the operator's reads, and the audit judges the slot clean."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from psycopg import sql

from tests.helpers import assert_eventually
from tests.helpers.audit import audit_report
from tests.helpers.worker import schedules_cli
from tests.integration.jobs import (
    executions,
    insert_invoices,
    invoice_job,
    registered,
    runs_closed,
    trigger_at,
)

NEXT_VERSION = 9999


def expand_like_the_next_release(db) -> list[str]:
    """Apply what an expand-only migration of N+1 may do; return the tables it grew."""
    tables = [
        name
        for (name,) in db.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            " AND tablename <> 'schema_migrations' ORDER BY tablename"
        )
    ]
    with db.transaction():
        for table in tables:
            db.execute(
                sql.SQL(
                    "ALTER TABLE {} ADD COLUMN next_release_note text,"
                    " ADD COLUMN next_release_flag boolean NOT NULL DEFAULT false"
                ).format(sql.Identifier(table))
            )
        db.execute(
            "CREATE TABLE next_release_audit_trail ("
            " id bigserial PRIMARY KEY,"
            " execution_id bigint REFERENCES job_executions (id),"
            " noted_at timestamptz NOT NULL DEFAULT now())"
        )
        db.execute(
            "CREATE INDEX job_executions_next_release_idx"
            " ON job_executions (next_release_flag, scheduled_at)"
        )
        db.execute(
            "INSERT INTO schema_migrations (version, name, checksum)"
            " VALUES (%s, 'next_release_expand', 'not-this-releases')",
            (NEXT_VERSION,),
        )
    return tables


async def test_this_release_runs_against_the_next_releases_expanded_schema(
    client, db, database_url, settings, task_queue, start_workers
):
    grown = expand_like_the_next_release(db)
    assert {"job_executions", "outbox_messages", "commit_journal"} <= set(grown)
    insert_invoices(db, 1500, due=date.today() - timedelta(days=10))
    start_workers(2)  # each migrates on start: the unknown version 9999 is left alone
    job = invoice_job(chunk_size=500)
    slot = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
    async with registered(client, job, task_queue):
        await trigger_at(client, job.id, slot)

        async def completed():
            rows = executions(db, job.id)
            assert [r["status"] for r in rows] == ["completed"], rows
            return rows[0]

        row = await assert_eventually(completed, timeout=120)
        await runs_closed(client, job.id, [slot])
        # The same slot again: a recorded no-op, not a second effect.
        await trigger_at(client, job.id, slot)

        async def noop_recorded():
            rows = executions(db, job.id)
            assert [r["duplicate_runs"] for r in rows] == [1], rows

        await assert_eventually(noop_recorded, timeout=120)
        await runs_closed(client, job.id, [slot])

        (reminded,) = db.execute(
            "SELECT count(DISTINCT idempotency_key) FROM outbox_messages WHERE execution_id = %s",
            (row["id"],),
        ).fetchone()
        assert reminded == 1500
        (applied,) = db.execute(
            "SELECT count(*) FROM schema_migrations WHERE version = %s", (NEXT_VERSION,)
        ).fetchone()
        assert applied == 1  # not reapplied, not removed

        runs = schedules_cli(settings, "runs", job.id, "--last", "5")
        assert runs.returncode == 0, runs.stderr
        assert "completed" in runs.stdout and "Traceback" not in runs.stderr

        report = await audit_report(
            client, database_url, task_queue, [job], start=slot - timedelta(minutes=1)
        )
        assert report.findings == [], report.findings
        assert report.rows == 1
