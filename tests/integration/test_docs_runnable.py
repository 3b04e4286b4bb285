"""The docs' shell blocks marked runnable run as written, against the dev stack.

A block is marked by the comment line `<!-- runnable: ... -->` just before its fence. Each
runs in bash (`set -euo pipefail`) from the checkout, with `TEMPORAL_ADDRESS` and
`DATABASE_URL` pointing at the session's servers, after the packaged catalog is synced
onto a queue no worker polls (so nothing it starts does work).
"""

from __future__ import annotations

import re
import subprocess

import pytest

from schedules.catalog.model import load_catalog
from schedules.sync.apply import sync
from tests.helpers import ROOT
from tests.helpers.worker import settings_env

RUNNABLE = re.compile(r"^<!-- runnable:[^\n]*-->\n```sh\n(.*?)^```$", re.MULTILINE | re.DOTALL)
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def runnable_blocks() -> list[tuple[str, str]]:
    return [
        (f"{path.name}:{text[: match.start()].count(chr(10)) + 2}", match[1])
        for path in DOCS
        for text in [path.read_text()]
        for match in RUNNABLE.finditer(text)
    ]


def test_the_docs_mark_blocks_runnable():
    assert any(name.startswith("operating.md:") for name, _ in runnable_blocks())


@pytest.mark.parametrize(("where", "block"), runnable_blocks())
async def test_a_runnable_block_runs_as_written(client, settings, where, block):
    jobs = list(load_catalog())
    await sync(client, jobs, settings.temporal_task_queue, prune=False)
    try:
        done = subprocess.run(
            ["bash", "-c", "set -euo pipefail\n" + block],
            cwd=ROOT,
            env=settings_env(settings),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"{where}:\n{done.stdout}\n{done.stderr}"
        if "invoice-reminders" in block:  # it reached this server, not another stack's
            info = (await client.get_schedule_handle("invoice-reminders").describe()).info
            assert info.num_actions >= 1, (where, info)
    finally:
        ids = [job.id for job in jobs]
        async for run in client.list_workflows(
            f"TaskQueue = '{settings.temporal_task_queue}' AND ExecutionStatus = 'Running'"
        ):
            await client.get_workflow_handle(run.id, run_id=run.run_id).terminate("test over")
        for job_id in ids:
            await client.get_schedule_handle(job_id).delete()
