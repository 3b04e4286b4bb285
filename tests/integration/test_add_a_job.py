"""docs/jobs.md's walkthroughs, "Adding a job" and "Adding a workflow job", followed to the
letter in a project of the user's own, outside this repository.

The code blocks are read from docs/jobs.md and written into a new directory as they say (the
first line of each names the file, and where in it). The project is installed into a venv
of its own on top of the built wheel's (tests/helpers/wheel.py: `scheduled-jobs` as it
ships, not this checkout), and every command of the page runs from the project's directory
against a fresh database and namespace. So the walkthrough is proved with the real
mechanism, the project's entry point, its migrations and its catalog file, and nothing of
this repository is copied or edited.

The commands as the test runs them: `python` is the project venv's interpreter; `pip
install .` is this interpreter's pip installing the project into that venv's site-packages
(no dependencies: the wheel's venv has them; its build backend from pip's cache);
`psql` is the test PostgreSQL's own. The test adds one thing the page does not say: each job
of the project's catalog is paused once written, so only the page's trigger runs it.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import psycopg
import pytest
from temporalio.service import RPCError

from devstack import free_port
from devstack.postgres import POSTGRES_BIN_PATH
from tests.helpers import ROOT, assert_eventually
from tests.helpers.wheel import InstalledWheel, site_packages
from tests.helpers.worker import WorkerProcess, settings_env
from tests.integration.jobs import backfill_slots
from tests.integration.namespaces import fleet_of_its_own

_FENCE = re.compile(r"^( *)```(\w+)\n(.*?)^\1```$", re.MULTILINE | re.DOTALL)


def walkthrough(title: str) -> str:
    text = (ROOT / "docs" / "jobs.md").read_text()
    start = text.index(f"## {title}\n")
    return text[start : text.index("\n## ", start + 1)]


def code_blocks(section: str) -> list[tuple[str, str]]:
    """(language, text) of each fenced block, without the list item's indentation."""
    found = []
    for match in _FENCE.finditer(section):
        indent, language, body = match.groups()
        lines = [line.removeprefix(indent) for line in body.splitlines(keepends=True)]
        found.append((language, "".join(lines)))
    return found


def apply_block(project: Path, body: str) -> Path:
    """Do what the block's first line says: create the file, or add to it where it says."""
    label, _, content = body.partition("\n")
    label = label.lstrip("-# ")
    target, _, where = label.partition(" ")
    path = project / target.rstrip(",")
    if where == "at the end":
        path.write_text(path.read_text().rstrip("\n") + "\n" + content)
    else:
        assert not where, f"unknown place {where!r} in {label!r}"
        assert not path.exists(), f"the walkthrough creates {target}, which exists"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return path


def pause_every_job(catalog: Path) -> None:
    """Pause each job of the catalog, so that none fires by the clock while the test runs:
    the walkthrough's trigger still runs a paused schedule, and nothing else may."""
    header = re.compile(r"^\[([a-z0-9-]+)\]$(?!\npaused = true)", re.MULTILINE)
    quiet = 'paused = true\nnote = "test: the walkthrough triggers its run"\n'
    catalog.write_text(header.sub(lambda m: f"{m.group(0)}\n{quiet}", catalog.read_text()))


def commands(body: str) -> list[list[str]]:
    return [shlex.split(line) for line in body.splitlines() if line.strip()]


class Project:
    """The user's project: its directory, its venv on top of the wheel's, its servers."""

    def __init__(self, root: Path, python: Path, env: dict[str, str]) -> None:
        self.root = root
        self.python = python
        self.env = env

    def write(self, title: str) -> list[list[list[str]]]:
        """Write the walkthrough's files; its shell blocks, command by command."""
        blocks = code_blocks(walkthrough(title))
        for language, body in blocks:
            if language != "sh":
                apply_block(self.root, body)
        pause_every_job(self.root / "jobs.toml")
        return [commands(body) for language, body in blocks if language == "sh"]

    def run(self, argv: list[str]) -> str:
        """A command of the walkthrough, from the project's directory."""
        program, *args = argv
        if program == "python":
            argv = [str(self.python), *args]
        elif argv == ["pip", "install", "."]:
            target = site_packages(self.python).strip()
            argv = [sys.executable, "-m", "pip", "install", "-q", "--no-deps"]
            argv += ["--upgrade", "--target", target, "."]
        elif program == "psql":
            argv = [str(POSTGRES_BIN_PATH / "psql"), *(self._expand(a) for a in args)]
        else:
            raise AssertionError(f"unexpected command in the walkthrough: {argv}")
        done = subprocess.run(argv, cwd=self.root, env=self.env, capture_output=True, text=True)
        assert done.returncode == 0, (argv, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr, done.stderr
        return done.stdout

    def _expand(self, arg: str) -> str:
        return arg.replace("$DATABASE_URL", self.env["DATABASE_URL"])

    def worker(self, log: Path) -> WorkerProcess:
        """A worker started from the project, with its venv, as restarting the workers would."""
        return WorkerProcess(self.env, log, python=self.python, cwd=self.root)


@pytest.fixture
async def project(installed_wheel_venv: InstalledWheel, postgres, client, tmp_path):
    """A new directory and a venv for the user's project, a fresh database and namespace."""
    namespace, settings = await fleet_of_its_own(client, postgres, "addjob")
    database_url = settings.database_url.get_secret_value()
    env = {k: v for k, v in settings_env(settings).items() if not k.startswith("PYTHON")}
    # The relay's mail goes to a port nothing listens on, not to a local stack's mail sink.
    env |= {"PYTHONUNBUFFERED": "1", "SMTP_PORT": str(free_port())}
    root = tmp_path / "acme-jobs"
    root.mkdir()
    assert not root.resolve().is_relative_to(ROOT)
    python = installed_wheel_venv.overlay(tmp_path / "venv")
    with psycopg.connect(database_url, autocommit=True) as db:
        yield Project(root, python, env), namespace, db
    for job_id in [*scheduled(root), *ENGINE_JOBS]:
        try:
            await namespace.get_schedule_handle(job_id).delete()
        except RPCError:
            pass


ENGINE_JOBS = tomllib.loads((ROOT / "schedules" / "engine.toml").read_text())


def scheduled(root: Path) -> list[str]:
    catalog = root / "jobs.toml"
    return list(tomllib.loads(catalog.read_text())) if catalog.exists() else []


def psql_rows(shown: str, width: int) -> set[tuple[str, ...]]:
    cells = [[c.strip() for c in line.split("|")] for line in shown.splitlines()]
    return {tuple(c) for c in cells if len(c) == width and c[0][:1].isdigit()}


async def test_the_walkthroughs_add_jobs_in_a_package_of_the_users_own(project, tmp_path):
    """ "Adding a job", then "Adding a workflow job" to the project it made, as the page
    tells: one project, one venv, one database; the workers restarted after the second."""
    user, namespace, db = project
    first = user.write("Adding a job")
    assert len(first) == 4, "the blocks changed shape"
    assert (user.root / "acme_jobs" / "invoice_snapshot" / "migrations").is_dir()
    worker = add_a_job(user, db, first, tmp_path / "worker.log")
    assert worker.stop() == 0, worker.log.read_text()[-3000:]  # drained on SIGTERM
    (row,) = db.execute(
        "SELECT status, result FROM job_executions WHERE job_name = 'invoice-snapshot'"
    ).fetchall()
    assert row == ("completed", {"counts": {"statuses": 2}})
    applied = db.execute("SELECT family, version, name FROM family_migrations").fetchall()
    assert applied == [("invoice_snapshot", 1, "invoice_snapshots")]

    second = user.write("Adding a workflow job")
    assert len(second) == 3, "the blocks changed shape"
    assert (user.root / "acme_jobs" / "late_fees" / "workflow.py").is_file()
    worker = await add_a_workflow_job(user, namespace, db, second, tmp_path / "worker2.log")
    assert worker.stop() == 0, worker.log.read_text()[-3000:]


def add_a_job(user: Project, db, shells: list[list[list[str]]], log: Path) -> WorkerProcess:
    """The commands of "Adding a job", from 5. on; the worker it started, still running."""
    run = user.run
    # 5. Install it beside scheduled-jobs.
    ((install,),) = [shells[0]]
    run(install)

    # 6. validate (the engine's jobs come with the project's catalog), migrate.
    validate, migrate = shells[1]
    checked = run(validate)
    assert checked.startswith("catalog ok: 1 job(s): invoice-snapshot; and the engine's 5"), checked
    migrated = run(migrate)
    assert "0001_executions" in migrated, migrated  # the engine's, then the family's
    assert migrated.rstrip().endswith("invoice_snapshot:0001_invoice_snapshots"), migrated

    # Invoices for the snapshot, seconds before the run's slot: it counts those made before it.
    db.execute(
        """
        INSERT INTO invoices (invoice_number, customer_email, status, due_date, amount_cents)
        SELECT 'SNAP-' || n, 'c@example.com', CASE WHEN n % 4 = 0 THEN 'Paid' ELSE 'Unpaid' END,
               current_date, n
        FROM generate_series(1, 40) AS n
        """
    )
    worker = user.worker(log)
    try:
        worker.wait_ready()
        # ... then sync: the project's job and the engine's.
        dry_run, sync = shells[2]
        assert re.search(r"^would create +invoice-snapshot$", run(dry_run), re.MULTILINE)
        synced = run(sync)
        for job_id in ["invoice-snapshot", *ENGINE_JOBS]:
            assert re.search(rf"^created +{job_id}$", synced, re.MULTILINE), synced

        # 7. Run it now, see its effect, audit.
        trigger, see, audit = shells[3]
        # `--wait` returns once the run has finished, so what it wrote is there to see.
        ran = run(trigger)
        assert re.search(r"\bmanual +completed\b.*statuses 2", ran), log.read_text()
        shown = run(see)
        rows = {row[1:] for row in psql_rows(shown, 4)}
        assert rows == {("Paid", "10", "220"), ("Unpaid", "30", "600")}, shown
        summary = run(audit).strip().splitlines()[-1]
        assert summary.startswith("audit: 0 finding(s);"), summary
    except BaseException:
        worker.stop()
        raise
    return worker


async def add_a_workflow_job(
    user: Project, namespace, db, shells: list[list[list[str]]], log: Path
) -> WorkerProcess:
    """The commands of "Adding a workflow job", then a run over its safety limit; the
    worker it started, still running."""
    run = user.run
    install, validate, migrate = shells[0]
    run(install)
    assert "late-fees" in run(validate)
    assert run(migrate).strip() == "migrations applied: late_fees:0001_late_fees"
    # Ten invoices long overdue (the fee applies to them) and five recent ones (it doesn't).
    db.execute(
        """
        INSERT INTO invoices (invoice_number, customer_email, status, due_date, amount_cents)
        SELECT 'LATE-' || n, 'c@example.com', 'Unpaid',
               current_date - CASE WHEN n <= 10 THEN 60 ELSE 5 END, 1000
        FROM generate_series(1, 15) AS n
        """
    )
    worker = user.worker(log)  # the workers restarted, serving the new family
    try:
        worker.wait_ready()
        (sync,) = shells[1]
        assert re.search(r"^created +late-fees$", run(sync), re.MULTILINE)

        trigger, see = shells[2]
        assert re.search(r"\bmanual +completed\b", run(trigger)), log.read_text()
        assert psql_rows(run(see), 2) == {("10", "10")}
        (row,) = db.execute(
            "SELECT status, result FROM job_executions WHERE job_name = 'late-fees'"
        ).fetchall()
        assert row[0] == "completed"
        assert row[1]["counts"] == {"add_late_fees.fees": 10, "announce_late_fees.announced": 10}

        # A run over the safety limit: 200 more overdue invoices are 210 fees of $5.00,
        # more than max_total_cents. Step 2 refuses; step 1's fees are removed again.
        db.execute(
            """
            INSERT INTO invoices (invoice_number, customer_email, status, due_date)
            SELECT 'LATE-X' || n, 'c@example.com', 'Unpaid', current_date - 90
            FROM generate_series(1, 200) AS n
            """
        )
        # Yesterday's 06:00 (London), backfilled: a slot of its own, whatever the clock.
        london = ZoneInfo("Europe/London")
        yesterday = datetime.now(london).date() - timedelta(days=1)
        slot = datetime.combine(yesterday, time(6), london).astimezone(UTC)
        await backfill_slots(namespace, "late-fees", slot, slot, margin=timedelta(seconds=1))

        async def compensated():
            rows = db.execute(
                "SELECT status, error FROM job_executions WHERE job_name = 'late-fees' "
                "ORDER BY scheduled_at"
            ).fetchall()
            assert [r[0] for r in rows] == ["compensated", "completed"], (
                rows,
                log.read_text()[-3000:],
            )
            return rows[0]

        _, error = await assert_eventually(compensated, timeout=60)
        assert "exceed max_total_cents 100000" in error
        assert "compensated add_late_fees" in error
        assert psql_rows(run(see), 2) == {("10", "10")}  # only the first run's fees
    except BaseException:
        worker.stop()
        raise
    return worker
