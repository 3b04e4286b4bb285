"""One invalid catalog entry blocks `sync` and `validate`, not the commands that read the
record or act on another job: they warn in one line and go on; `check` checks the other
jobs and reports the entry as an error (real servers)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from schedules.catalog.model import load_catalog
from schedules.sync.apply import sync
from tests.helpers.worker import schedules_cli
from tests.integration.jobs import end_open_runs

GOOD = """\
[partly-good]
kind = "invoice-reminders"
cron = "30 2 * * *"
timezone = "UTC"
paused = true
"""
BROKEN = """
[partly-broken]
kind = "invoice-reminders"
cron = "30 2 * * *"
timezone = "Mars/Base"
"""
WARNING = (
    "warning: 1 invalid catalog entry left out ('partly-broken'); "
    "`python -m schedules validate` lists the problems"
)


def run(settings, catalog: Path, *args: str) -> subprocess.CompletedProcess:
    done = schedules_cli(settings, *args, catalog=catalog)
    assert "Traceback" not in done.stderr, done.stderr
    return done


async def test_a_broken_entry_blocks_sync_but_not_the_other_jobs(client, settings, tmp_path):
    good = tmp_path / "good.toml"
    good.write_text(GOOD)
    await sync(
        client, list(load_catalog(good, engine=False)), settings.temporal_task_queue, prune=False
    )
    catalog = tmp_path / "jobs.toml"
    catalog.write_text(GOOD + BROKEN)
    try:
        for command in (["validate"], ["sync", "--no-prune"]):
            done = run(settings, catalog, *command)
            assert done.returncode == 2, done
            assert "job 'partly-broken': timezone:" in done.stderr, done.stderr

        for command in (
            ["list"],
            ["trigger", "partly-good"],
            ["runs", "partly-good"],
            ["explain", "partly-good"],
        ):
            done = run(settings, catalog, *command)
            assert done.returncode in (0, 1), done  # explain: 1, the time did not run
            assert done.stderr.strip().splitlines()[0] == WARNING, done.stderr
            assert "partly-good" in done.stdout, done.stdout

        done = run(settings, catalog, "check", "--json")
        assert done.returncode == 2, done  # cannot tell about the broken entry
        report = json.loads(done.stdout)
        assert [job["job"] for job in report["jobs"]] == ["partly-good"]
        (error,) = report["errors"]
        assert error.startswith("job 'partly-broken': timezone:"), error
        assert "invalid catalog entry, not checked" in error

        done = run(settings, catalog, "trigger", "partly-broken")
        assert done.returncode == 2
        assert done.stderr.strip() == (
            "error: job 'partly-broken': timezone: is not a known IANA time zone: 'Mars/Base'; "
            "`python -m schedules validate` lists every problem"
        )
    finally:
        await client.get_schedule_handle("partly-good").delete()
        await end_open_runs(client, settings.temporal_task_queue)
