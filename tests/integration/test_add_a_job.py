"""docs/jobs.md's walkthroughs, "Adding a job" and "Adding a workflow job", followed to the
letter on a copy of the project.

The code blocks are read from docs/jobs.md and applied as they say (the first line of each
names the file, and where in it); the commands are the README's, run from the copy, whose
packages come first on the path of every process started there. So the walkthrough is
proved with the real registration mechanism: a package under `jobs/`, a migration and a
catalog table, and nothing of the working tree is edited.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tomllib
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from temporalio.client import ScheduleBackfill, ScheduleOverlapPolicy
from temporalio.service import RPCError

from devstack.temporal import temporal_binary
from tests.helpers import ROOT, assert_eventually, wait_for_text
from tests.helpers.worker import settings_env

PACKAGES = ("core", "timing", "activities", "workflows", "jobs", "worker", "schedules")
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


def next_migration_number(project: Path) -> str:
    numbers = [int(p.name[:4]) for p in (project / "worker" / "migrations").glob("[0-9]*.sql")]
    return f"{max(numbers) + 1:04d}"


def apply_block(project: Path, body: str) -> Path:
    """Do what the block's first line says: create the file, or add to it where it says."""
    label, _, content = body.partition("\n")
    label = label.lstrip("-# ")
    target, _, where = label.partition(" ")
    target = target.rstrip(",").replace("NNNN", next_migration_number(project))
    path = project / target
    if where.startswith("at the end"):
        path.write_text(path.read_text().rstrip("\n") + "\n\n" + content)
    else:
        assert not where or where.startswith("("), f"unknown place {where!r} in {label!r}"
        assert not path.exists(), f"the walkthrough creates {target}, which exists"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return path


def pause_every_job(catalog: Path) -> None:
    """Pause each job of the copy's catalog, so that none fires by the clock while the test
    runs: the walkthrough's trigger still runs a paused schedule, and nothing else may."""
    header = re.compile(r"^\[([a-z0-9-]+)\]$", re.MULTILINE)
    quiet = 'paused = true\nnote = "test: the walkthrough triggers its run"\n'
    catalog.write_text(header.sub(lambda m: f"{m.group(0)}\n{quiet}", catalog.read_text()))


def commands(body: str) -> list[list[str]]:
    return [shlex.split(line) for line in body.splitlines() if line.strip()]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the project's packages: the walkthrough edits this, never the tree."""
    copy = tmp_path / "project"
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    return copy


class Walkthrough:
    """A walkthrough applied to the project copy, its commands run from there."""

    def __init__(self, title: str, project: Path, settings, temporal, database_url) -> None:
        blocks = code_blocks(walkthrough(title))
        self.files = [body for language, body in blocks if language in ("sql", "python", "toml")]
        self.shells = [commands(body) for language, body in blocks if language == "sh"]
        self.project = project
        self.number = next_migration_number(project)
        self.env = settings_env(settings)
        self.temporal = temporal
        self.database_url = database_url

    def apply(self) -> list[Path]:
        written = [apply_block(self.project, body) for body in self.files]
        # Every schedule the walkthrough's sync makes is paused: only its trigger runs.
        pause_every_job(self.project / "schedules" / "jobs.toml")
        return written

    def run(self, argv: list[str]) -> str:
        """A command of the walkthrough, from the copy: its packages come first on the path."""
        program, *args = argv
        if program == ".venv/bin/python":
            argv = [sys.executable, *args]
        elif program == ".venv/bin/temporal":
            argv = [temporal_binary(), *args, "--address", self.temporal.address]
        else:
            raise AssertionError(f"unexpected command in the walkthrough: {argv}")
        done = subprocess.run(argv, cwd=self.project, env=self.env, capture_output=True, text=True)
        assert done.returncode == 0, (argv, done.stdout, done.stderr)
        return done.stdout

    @contextlib.contextmanager
    def worker(self, log: Path):
        """A worker process started from the copy, as restarting the workers would."""
        with log.open("wb") as out:
            worker = subprocess.Popen(
                [sys.executable, "-m", "worker"],
                cwd=self.project,
                env=self.env,
                stdout=out,
                stderr=out,
            )
        try:
            wait_for_text(log, "worker ready", timeout=60)
            yield worker
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(60)


async def delete_schedules(client, project: Path) -> None:
    catalog = tomllib.loads((project / "schedules" / "jobs.toml").read_text())
    for job_id in catalog:  # the sync made one schedule per job on this test's queue
        try:
            await client.get_schedule_handle(job_id).delete()
        except RPCError:
            pass


def psql_rows(shown: str, width: int) -> set[tuple[str, ...]]:
    cells = [[c.strip() for c in line.split("|")] for line in shown.splitlines()]
    return {tuple(c) for c in cells if len(c) == width and c[0][:1].isdigit()}


async def test_the_readme_walkthrough_adds_a_job_that_runs(
    project, client, db, database_url, settings, temporal, tmp_path
):
    guide = Walkthrough("Adding a job", project, settings, temporal, database_url)
    assert len(guide.files) == 5 and len(guide.shells) == 3, "the blocks changed shape"
    written = guide.apply()
    number, run = guide.number, guide.run
    assert project / "worker" / "migrations" / f"{number}_invoice_snapshots.sql" in written
    assert (project / "jobs" / "invoice_snapshot" / "activities.py") in written

    # Invoices for the snapshot, seconds before the run's slot: it counts those made before it.
    db.execute(
        """
        INSERT INTO invoices (invoice_number, customer_email, status, due_date, amount_cents)
        SELECT 'SNAP-' || n, 'c@example.com', CASE WHEN n % 4 = 0 THEN 'Paid' ELSE 'Unpaid' END,
               current_date, n
        FROM generate_series(1, 40) AS n
        """
    )

    # 4. validate, migrate.
    validate, migrate = guide.shells[0]
    assert "invoice-snapshot" in run(validate)
    assert f"{number}_invoice_snapshots" in run(migrate)

    # ... restart the workers (here: start one, from the copy) ...
    log = tmp_path / "worker.log"
    try:
        with guide.worker(log):
            # ... then sync: the whole catalog, as an operator would.
            dry_run, sync = guide.shells[1]
            assert re.search(r"^would create +invoice-snapshot$", run(dry_run), re.MULTILINE)
            assert re.search(r"^created +invoice-snapshot$", run(sync), re.MULTILINE)

            # 5. Run it now and see its effect.
            trigger, see = guide.shells[2]
            # `--wait` returns once the run has finished, so what it wrote is there to see.
            assert re.search(r"\bmanual +completed\b.*statuses 2", run(trigger)), log.read_text()
            shown = run(see)
            rows = {row[1:] for row in psql_rows(shown, 4)}
            assert rows == {("Paid", "10", "220"), ("Unpaid", "30", "600")}, shown
        (row,) = db.execute(
            "SELECT status, result FROM job_executions WHERE job_name = 'invoice-snapshot'"
        ).fetchall()
        assert row == ("completed", {"counts": {"statuses": 2}})
    finally:
        await delete_schedules(client, project)


async def test_the_workflow_walkthrough_adds_a_job_of_steps_that_compensates(
    project, client, db, database_url, settings, temporal, tmp_path
):
    guide = Walkthrough("Adding a workflow job", project, settings, temporal, database_url)
    assert len(guide.files) == 6 and len(guide.shells) == 3, "the blocks changed shape"
    written = guide.apply()
    assert project / "jobs" / "late_fees" / "workflow.py" in written
    run = guide.run
    # Ten invoices long overdue (the fee applies to them) and five recent ones (it doesn't).
    db.execute(
        """
        INSERT INTO invoices (invoice_number, customer_email, status, due_date, amount_cents)
        SELECT 'LATE-' || n, 'c@example.com', 'Unpaid',
               current_date - CASE WHEN n <= 10 THEN 60 ELSE 5 END, 1000
        FROM generate_series(1, 15) AS n
        """
    )
    validate, migrate = guide.shells[0]
    assert "late-fees" in run(validate)
    assert f"{guide.number}_late_fees" in run(migrate)
    log = tmp_path / "worker.log"
    try:
        with guide.worker(log):
            (sync,) = guide.shells[1]
            assert re.search(r"^created +late-fees$", run(sync), re.MULTILINE)

            trigger, see = guide.shells[2]
            assert re.search(r"\bmanual +completed\b", run(trigger)), log.read_text()
            assert psql_rows(run(see), 2) == {("10", "10")}
            (row,) = db.execute(
                "SELECT status, result FROM job_executions WHERE job_name = 'late-fees'"
            ).fetchall()
            assert row[0] == "completed"
            assert row[1]["counts"] == {
                "add_late_fees.fees": 10,
                "announce_late_fees.announced": 10,
            }

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
            await client.get_schedule_handle("late-fees").backfill(
                ScheduleBackfill(
                    start_at=slot - timedelta(seconds=1),
                    end_at=slot + timedelta(seconds=1),
                    overlap=ScheduleOverlapPolicy.ALLOW_ALL,
                )
            )

            async def compensated():
                rows = db.execute(
                    "SELECT status, error FROM job_executions WHERE job_name = 'late-fees' "
                    "ORDER BY scheduled_at"
                ).fetchall()
                assert [r[0] for r in rows] == ["compensated", "completed"], rows
                return rows[0]

            _, error = await assert_eventually(_explained(compensated, db, log), timeout=60)
            assert "exceed max_total_cents 100000" in error
            assert "compensated add_late_fees" in error
            assert psql_rows(run(see), 2) == {("10", "10")}  # only the first run's fees
    finally:
        await delete_schedules(client, project)


def _explained(check, db, log: Path):
    """`check`, whose failure also shows the runs and the worker's log."""

    async def explained():
        try:
            return await check()
        except AssertionError as exc:
            runs = db.execute("SELECT job_name, status, error FROM job_executions").fetchall()
            raise AssertionError(
                f"{exc}\nruns: {runs}\nworker: {log.read_text()[-3000:]}"
            ) from None

    return explained
