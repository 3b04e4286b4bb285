"""docs/runtime-schedules.md's Python walkthrough runs as written on a fresh database (its
shell walkthrough is a runnable block: tests/integration/test_docs_runnable.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import psycopg

from tests.helpers import ROOT

PAGE = ROOT / "docs" / "runtime-schedules.md"


def test_the_python_walkthrough_runs_as_written(database_url):
    (block,) = re.findall(r"^```python\n(.*?)^```$", PAGE.read_text(), re.MULTILINE | re.DOTALL)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "TENANT_"))}
    done = subprocess.run(
        [sys.executable, "-c", block],
        cwd=ROOT,
        env=env | {"DATABASE_URL": database_url},
        capture_output=True,
        text=True,
        timeout=120,
    )
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
