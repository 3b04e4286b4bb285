"""Migrations from empty, and from several processes at once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
    done = migrate(url, None, processes=3)
    outputs = [(d.stdout, d.stderr) for d in done]
    assert [d.returncode for d in done] == [0, 0, 0], outputs

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


def install_family(site: Path, family: str, migrations: dict[str, str]) -> Path:
    """A job family `family` (package `<family>_pkg`) with its `migrations/` folder, as pip
    installs it into `site`: the package and a dist-info folder declaring its entry point."""
    info = site / f"{family}_pkg-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {family}-pkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[scheduled_jobs.jobs]\n{family} = {family}_pkg\n")
    folder = site / f"{family}_pkg" / "migrations"
    folder.mkdir(parents=True)
    (site / f"{family}_pkg" / "__init__.py").write_text("")
    for name, text in migrations.items():
        (folder / name).write_text(text)
    return folder


def migrate(url: str, site: Path | None, processes: int = 1) -> list[subprocess.CompletedProcess]:
    """`python -m worker migrate`, `processes` at once, with the families in `site` (None:
    the installed ones only)."""
    env = {"DATABASE_URL": url, "PATH": "/usr/bin:/bin"}
    if site is not None:
        env["PYTHONPATH"] = str(site)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "worker", "migrate"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    return [
        subprocess.CompletedProcess(p.args, p.returncode, *out)
        for p, out in zip(procs, outputs, strict=True)
    ]


def test_families_migrations_apply_after_the_engines_once_each_in_order(postgres, tmp_path):
    url = postgres.create_database("migrate_families")
    install_family(
        tmp_path,
        "zeta",
        {
            "0001_things.sql": "CREATE TABLE zeta_things (id int PRIMARY KEY);",
            # A family's migration may use another family's tables: families go by name.
            "0002_links.sql": "CREATE TABLE zeta_links (a int REFERENCES alpha_orders (id));",
        },
    )
    alpha = install_family(
        tmp_path, "alpha", {"0001_orders.sql": "CREATE TABLE alpha_orders (id int PRIMARY KEY);"}
    )
    done = migrate(url, tmp_path, processes=2)
    assert [d.returncode for d in done] == [0, 0], [d.stderr for d in done]
    applied = [
        name
        for d in done
        for name in d.stdout.strip().removeprefix("migrations applied: ").split(", ")
        if name != "none"
    ]
    engine = [f"{m.version:04d}_{m.name}" for m in load_migrations()]
    families = ["alpha:0001_orders", "zeta:0001_things", "zeta:0002_links"]
    assert sorted(applied) == sorted(engine + families)  # each by exactly one process
    # One process applied them all, in order: the engine's, then by family and number.
    (first,) = [d for d in done if "none" not in d.stdout]
    assert first.stdout.strip().removeprefix("migrations applied: ").split(", ") == (
        engine + families
    )
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT family, version, name FROM family_migrations ORDER BY applied_at, family"
        ).fetchall()
        assert rows == [("alpha", 1, "orders"), ("zeta", 1, "things"), ("zeta", 2, "links")]
        engine_rows = conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0]
        assert engine_rows == len(engine)

    (again,) = migrate(url, tmp_path)
    assert again.stdout.strip() == "migrations applied: none", again.stderr

    # An applied migration edited: refused in one line, nothing applied after it.
    (alpha / "0001_orders.sql").write_text("CREATE TABLE alpha_orders (id bigint);")
    (alpha / "0002_more.sql").write_text("CREATE TABLE alpha_more (id int);")
    (edited,) = migrate(url, tmp_path)
    assert edited.returncode == 2
    assert edited.stderr.splitlines() == [
        "error: migration alpha:0001_orders was changed after it was applied; add a new "
        "migration instead"
    ]
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT to_regclass('alpha_more')").fetchone()[0] is None


def test_a_gap_in_a_familys_migrations_is_named(postgres, tmp_path):
    url = postgres.create_database("migrate_family_gap")
    install_family(tmp_path, "gappy", {"0002_late.sql": "SELECT 1;"})
    (done,) = migrate(url, tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: job family 'gappy': migration 0001 is missing before 0002"
    ]
    with psycopg.connect(url) as conn:  # refused before anything was applied
        assert conn.execute("SELECT to_regclass('schema_migrations')").fetchone()[0] is None
