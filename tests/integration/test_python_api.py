"""The Python API's example in docs/python-api.md runs as written against the dev stack.

The block marked `<!-- runnable python: ... -->` runs as a script in its own process, with
the session's servers in its environment and a task queue no worker polls (its triggered
run stays open until the test ends it). The job it syncs is removed afterwards.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys

from temporalio.service import RPCError

from tests.helpers import ROOT
from tests.helpers.worker import settings_env
from tests.integration.jobs import end_open_runs

PAGE = ROOT / "docs" / "python-api.md"
BLOCK = re.compile(r"^<!-- runnable python:[^\n]*-->\n```python\n(.*?)^```$", re.M | re.S)
JOB = "api-example"


def test_the_page_has_one_runnable_example():
    assert len(BLOCK.findall(PAGE.read_text())) == 1


async def test_the_example_runs_as_written(client, settings, tmp_path):
    (block,) = BLOCK.findall(PAGE.read_text())
    script = tmp_path / "example.py"
    script.write_text(block)
    try:
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=ROOT,
            env=settings_env(settings),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
        assert "would create" in done.stdout and JOB in done.stdout, done.stdout
        assert f"started {JOB}-" in done.stdout, done.stdout
        assert "execution(s) recorded" in done.stdout, done.stdout
    finally:
        await end_open_runs(client, settings.temporal_task_queue)
        with contextlib.suppress(RPCError):  # never created: the assertion above says why
            await client.get_schedule_handle(JOB).delete()
