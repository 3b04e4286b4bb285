"""The docs' shell blocks marked runnable run as written, against the dev stack; every
other shell block of README.md and docs/ says who runs it, or why no test can
(`tests/helpers/docs.py`).

A block is marked by the comment line `<!-- runnable: ... -->` just before its fence. Each
runs in bash (`set -euo pipefail`) from the checkout, with `TEMPORAL_ADDRESS` and
`DATABASE_URL` pointing at the session's servers and the embedded PostgreSQL's client
tools (`pg_dump`, `pg_restore`) first on the `PATH`, after the packaged catalog is synced
onto a queue no worker polls (so nothing it starts does work). The blocks that need
`make run`'s stack (its demo data, workers, mail sink) run in
tests/integration/test_localstack.py.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from devstack.postgres import POSTGRES_BIN_PATH
from schedules.catalog.model import load_catalog
from schedules.sync.apply import sync
from tests.helpers import ROOT
from tests.helpers.docs import KINDS, marked, shell_blocks
from tests.helpers.worker import settings_env
from tests.integration.jobs import end_open_runs


def runnable_blocks() -> list[tuple[str, str]]:
    return [(block.where, block.body) for block in marked("runnable:")]


def test_the_docs_mark_blocks_runnable():
    assert any(name.startswith("operating.md:") for name, _ in runnable_blocks())
    assert any(name.startswith("deploy.md:") for name, _ in runnable_blocks())  # backup


def test_every_shell_block_says_who_runs_it():
    blocks = shell_blocks()
    assert len(blocks) >= 20
    unmarked = [b.where for b in blocks if not b.note.startswith(KINDS)]
    assert not unmarked, f"shell blocks that say not who runs them: {unmarked}"
    for block in blocks:
        if block.note.startswith("run by "):
            test = ROOT / block.note.removeprefix("run by ").split()[0]
            assert test.is_file(), (block.where, block.note)
            assert block.where.split(":")[0] in test.read_text(), (block.where, test)


@pytest.mark.parametrize(("where", "block"), runnable_blocks())
async def test_a_runnable_block_runs_as_written(client, settings, tmp_path, where, block):
    jobs = list(load_catalog())
    await sync(client, jobs, settings.temporal_task_queue, prune=False)
    try:
        done = subprocess.run(
            ["bash", "-c", "set -euo pipefail\n" + block],
            cwd=ROOT,
            env=settings_env(
                settings,
                PATH=f"{POSTGRES_BIN_PATH}{os.pathsep}{os.environ['PATH']}",
                BACKUP_DIR=str(tmp_path),  # where the backup block keeps its dump
            ),
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
        await end_open_runs(client, settings.temporal_task_queue)
        for job_id in ids:
            await client.get_schedule_handle(job_id).delete()
