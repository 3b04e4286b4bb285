"""Migrations from empty, and from several processes at once."""

from __future__ import annotations

import subprocess
import sys

import psycopg

from tests.helpers import ROOT
from worker.migrate import apply_migrations, load_migrations


def test_every_migration_applies_from_empty_and_builds_the_schema(postgres):
    url = postgres.create_database("migrate_from_empty")
    applied = apply_migrations(url)
    assert [m.version for m in applied] == [m.version for m in load_migrations()]
    assert apply_migrations(url) == []

    with psycopg.connect(url) as conn:
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
            )
        }
        assert {"job_executions", "outbox_messages", "invoices", "schema_migrations"} <= tables
        # An invoice can be inserted with only the seed's columns.
        conn.execute(
            "INSERT INTO invoices (invoice_number, customer_email, status, due_date)"
            " VALUES ('INV-1', 'a@example.com', 'Unpaid', current_date)"
        )
        unique = conn.execute(
            """
            SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c
            WHERE c.conrelid = 'job_executions'::regclass AND c.contype = 'u'
            """
        ).fetchone()[0]
        assert unique == "UNIQUE (job_name, scheduled_at)"
        # `trigger`, superseded by `origin` in 0014, dropped in 0024 (its contract step).
        columns = {
            r[0]
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns"
                " WHERE table_name = 'job_executions'"
            )
        }
        assert "origin" in columns and "trigger" not in columns


def test_three_processes_migrating_at_once_apply_each_migration_once(postgres):
    url = postgres.create_database("migrate_concurrently")
    env = {"DATABASE_URL": url, "PATH": "/usr/bin:/bin"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "worker", "migrate"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outputs

    expected = [f"{m.version:04d}_{m.name}" for m in load_migrations()]
    applied = [
        name
        for out, _ in outputs
        for name in out.strip().removeprefix("migrations applied: ").split(", ")
        if name != "none"
    ]
    assert sorted(applied) == expected  # each applied by exactly one process

    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT version FROM schema_migrations ORDER BY version").fetchall()
    assert [r[0] for r in rows] == [m.version for m in load_migrations()]
