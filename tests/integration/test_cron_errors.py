"""Every malformed cron of `tests/cron_table.py` is refused alike by `validate`, `sync` and
`next` of that job: exit 2, one line naming the job, the field and the value, no traceback,
nothing sent to Temporal; `next` of the catalog's other job still answers, with one warning. The commands run in-process (`schedules.cli.main.main`, what the entry point
calls) for the whole table, and as real processes for a few of it."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from schedules.cli.main import main
from tests.cron_table import MALFORMED
from tests.helpers import ROOT
from tests.integration.namespaces import fresh_namespace

GOOD = '[good-job]\nkind = "invoice-reminders"\ncron = "0 9 * * *"\ntimezone = "UTC"\n\n'


def catalog(tmp_path, cron: str):
    path = tmp_path / f"jobs-{uuid.uuid4().hex[:6]}.toml"
    escaped = cron.replace("\\", "\\\\").replace('"', '\\"')
    path.write_text(
        GOOD + f'[bad-job]\nkind = "invoice-reminders"\ncron = "{escaped}"\ntimezone = "UTC"\n'
    )
    return path


def the_line(stderr: str, field: str, value: str) -> str:
    """The problem of the one line of `stderr` that names the job (what follows `; ` says
    what the command did about it); it must name field and value too."""
    assert "Traceback" not in stderr
    (line,) = [line for line in stderr.splitlines() if "bad-job" in line]
    # One problem: `error: <problem>; nothing was changed` (several: one indented line each).
    assert line.strip().removeprefix("error: ").startswith("job 'bad-job': cron: "), line
    assert field in line and repr(value) in line, line
    return line.rsplit("; ", 1)[0]


@pytest.fixture
async def namespace(client: Client) -> str:
    return (await fresh_namespace(client, "cron-errors")).namespace


def test_validate_next_and_sync_refuse_every_malformed_cron_alike(
    tmp_path, capsys, monkeypatch, client, namespace
):
    monkeypatch.setenv("TEMPORAL_ADDRESS", client.service_client.config.target_host)
    monkeypatch.setenv("TEMPORAL_NAMESPACE", namespace)
    for cron, field, value in MALFORMED:
        path = str(catalog(tmp_path, cron))
        lines = set()
        for command in (["validate"], ["next", "bad-job"], ["sync"]):
            code = main(["--catalog", path, "--without-engine", *command])
            out = capsys.readouterr()
            assert code == 2, (cron, command, out)
            lines.add(the_line(out.err, field, value))
        assert len(lines) == 1, (cron, lines)  # the very same problem from all three
        assert main(["--catalog", path, "--without-engine", "next", "good-job"]) == 0
        warned = capsys.readouterr().err.splitlines()
        assert warned == [
            "warning: 1 invalid catalog entry left out ('bad-job'); "
            "`python -m schedules validate` lists the problems"
        ], warned


async def test_nothing_reaches_temporal(tmp_path, client, namespace):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "DATABASE_"))}
    env.update(
        TEMPORAL_ADDRESS=client.service_client.config.target_host, TEMPORAL_NAMESPACE=namespace
    )
    for cron, field, value in [
        MALFORMED[0],
        ("0 0 30 2 *", "day-of-month", "30"),
        ("@every 5m", "cron", "@every 5m"),
    ]:
        path = str(catalog(tmp_path, cron))
        for command in (["validate"], ["next", "bad-job"], ["sync"]):
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "schedules",
                    "--catalog",
                    path,
                    "--without-engine",
                    *command,
                ],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 2, (cron, command, done.stderr)
            the_line(done.stderr, field, value)
    scoped = await Client.connect(client.service_client.config.target_host, namespace=namespace)
    for job_id in ("good-job", "bad-job"):  # not even the good job of the catalog
        with pytest.raises(RPCError) as missing:
            await scoped.get_schedule_handle(job_id).describe()
        assert missing.value.status == RPCStatusCode.NOT_FOUND
