"""docs/runtime-schedules.md's Python walkthrough runs as written on a fresh database (its
shell walkthrough is a runnable block: tests/integration/test_docs_runnable.py)."""

from __future__ import annotations

import psycopg

from tests.helpers import ROOT
from tests.helpers.docs import run_python_example

PAGE = ROOT / "docs" / "runtime-schedules.md"


def test_the_python_walkthrough_runs_as_written(database_url):
    done = run_python_example(PAGE, database_url)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("rt-") and " 1 " in lines[0]
    assert "['month-end'] {} []" in done.stdout
    assert lines[-1] == "a future fire time"
    with psycopg.connect(database_url) as conn:
        actions = [
            r[0] for r in conn.execute("SELECT action FROM runtime_schedule_changes ORDER BY id")
        ]
    assert actions == ["create", "update", "pause", "resume", "trigger", "create"]
