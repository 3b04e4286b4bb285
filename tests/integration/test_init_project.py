"""A new user's first hour (issue 37, item 3): `python -m schedules init` from the installed
wheel writes a project outside the checkout; installed beside the wheel, its own job kind
and runtime kind run through migrate, sync, a trigger, a runtime slot and the audit against
the session's real servers, and its own tests pass on the package's pytest plugin. No file
of this repository is used but the wheel built from it. It follows docs/testing.md's first
block (init, the install with the `test` extra, the project's pytest) and the generated
README's commands.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

import psycopg
import pytest
from temporalio.client import Client
from temporalio.service import RPCError

from devstack import EmbeddedPostgres, free_port
from tests.helpers import ROOT
from tests.helpers.wheel import InstalledWheel, run
from tests.helpers.worker import WorkerProcess, settings_env
from tests.integration.namespaces import fleet_of_its_own

pytestmark = pytest.mark.timeout(900)  # the project's install and its own test session

PROJECT = "shop-jobs"
PACKAGE = "shop_jobs"


@pytest.fixture(scope="module")
def project(installed_wheel_venv: InstalledWheel, tmp_path_factory) -> Iterator[tuple[Path, Path]]:
    """(the project `schedules init` wrote, the interpreter of a venv holding it, installed
    editable with its `test` extra, over the wheel's runtime install)."""
    where = tmp_path_factory.mktemp("new")
    assert not where.resolve().is_relative_to(ROOT)
    made = run(
        [installed_wheel_venv.python, "-m", "schedules", "init", PROJECT],
        cwd=where,
        env=_clean(os.environ),
    )
    assert made.stdout.startswith(f"wrote 9 file(s) into {PROJECT} (package {PACKAGE}):")
    python = installed_wheel_venv.overlay(tmp_path_factory.mktemp("project-venv") / "venv")
    pip = [sys.executable, "-m", "pip", "--python", python, "install", "-q"]
    run([*pip, "-e", f"{where / PROJECT}[test]"], timeout=600)
    yield where / PROJECT, python


def _clean(env: os._Environ | dict[str, str]) -> dict[str, str]:
    """`env` without what would reach into this checkout or this test session: the
    checkout on sys.path, its servers' settings, its pytest's temporary root."""
    prefixes = ("PYTHON", "PYTEST", "TEMPORAL_", "DATABASE_", "SCHEDULES_")
    return {k: v for k, v in env.items() if not k.startswith(prefixes)}


async def test_the_new_project_migrates_syncs_runs_its_kinds_and_audits(
    project, postgres: EmbeddedPostgres, client: Client, tmp_path
):
    directory, python = project
    namespace, settings = await fleet_of_its_own(client, postgres, "init")
    database_url = settings.database_url.get_secret_value()  # empty
    # The relay's mail goes to a port nothing listens on, not to a local stack's mail sink.
    env = settings_env(settings, SMTP_PORT=str(free_port()))
    env = _clean(env) | {k: v for k, v in env.items() if k.startswith(("TEMPORAL_", "DATABASE_"))}
    env["PYTHONUNBUFFERED"] = "1"

    def project_cli(*argv: str, catalog: bool = True) -> str:
        extra = {"SCHEDULES_CATALOG": "catalog.toml"} if catalog else {}
        done = run([python, "-m", *argv], cwd=directory, env=env | extra, timeout=300)
        assert "Traceback" not in done.stderr, done.stderr
        return done.stdout

    project_cli("worker", "migrate", catalog=False)
    db = psycopg.connect(database_url, autocommit=True)
    tables = "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'sales%%'"
    assert db.execute(tables).fetchone() == (3,)  # the family's migration, after the engine's

    project_cli("schedules", "sync", "--catalog", "catalog.toml", catalog=False)
    for job_id in ("daily-sales-totals", "outbox-relay"):  # the project's, and the engine's
        await namespace.get_schedule_handle(job_id).describe()
    worker = WorkerProcess(env, tmp_path / "worker.log", python=python, cwd=directory)
    try:
        worker.wait_ready()
        today = datetime.now(UTC).date()
        for day in (today - timedelta(days=1), today):  # the day before the slot, either way
            _sell(db, day, [("north", 1200), ("north", 800), ("south", 500)])

        waited = project_cli("schedules", "trigger", "daily-sales-totals", "--wait")
        assert "completed" in waited and "days 1" in waited and "totals 2" in waited, waited
        last = waited.strip().splitlines()[-1]
        assert last == "1 run(s) of daily-sales-totals: 1 ran or had nothing to do", waited
        totals = db.execute("SELECT region, sales, amount_cents FROM sales_daily_totals")
        assert sorted(totals.fetchall()) == [("north", 2, 2000), ("south", 1, 500)]

        # A runtime schedule of the project's own kind (paused: its hourly fire times must
        # add no run), and one slot of it now: the last day's sales of its region.
        _sell(db, None, [("east", 700)])
        created = project_cli(
            *("schedules", "tenants", "create", "--tenant", "acme", "--name", "east"),
            *("--kind", "sales-digest", "--cron", "0 * * * *", "--timezone", "UTC"),
            *("--params", json.dumps({"region": "east"}), "--paused", "--note", "test"),
        )
        ledger = re.match(r"created (rt-\d+) ", created)[1]
        slot = project_cli("schedules", "tenants", "trigger", ledger, "--wait")
        assert "completed" in slot and "digests 1" in slot and "sales 1" in slot, slot
        digests = db.execute("SELECT region, sales, amount_cents FROM sales_digests")
        assert digests.fetchall() == [("east", 1, 700)]

        # As the audit CronJob runs it: exit 0 is no finding, the runs' rows read.
        summary = project_cli("schedules", "audit").strip().splitlines()[-1]
        assert summary.startswith("audit: 0 finding(s);"), summary
        assert int(re.search(r"(\d+) row\(s\) read", summary)[1]) >= 2, summary
    finally:
        stopped = worker.stop()
        db.close()
        async for listed in await namespace.list_schedules():
            try:
                await namespace.get_schedule_handle(listed.id).delete()
            except RPCError:
                pass
    assert stopped == 0, worker.log.read_text()[-3000:]  # drained on SIGTERM, exit 0


def test_the_new_projects_own_tests_pass_on_the_plugin(project):
    """Its tests start their own servers and workers (`devstack.pytest_plugin`)."""
    directory, python = project
    done = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=directory,
        env=_clean(os.environ),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert re.search(r"^2 passed", done.stdout.splitlines()[-1]), done.stdout[-2000:]


def _sell(db: psycopg.Connection, day: date | None, sales: list[tuple[str, int]]) -> None:
    """Sales at noon (UTC) of `day`, or a minute ago."""
    at = datetime.combine(day, time(12), UTC) if day else datetime.now(UTC) - timedelta(minutes=1)
    for region, cents in sales:
        db.execute(
            "INSERT INTO sales (region, amount_cents, sold_at) VALUES (%s, %s, %s)",
            (region, cents, at),
        )
