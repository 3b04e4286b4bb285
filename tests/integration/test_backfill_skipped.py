"""A backfill under overlap Skip (the Web UI dialog's default) drops slots: `check` names
each one, `explain` says why, and what the run the backfill started reads of the server at
its end (`activities.catchup.backfills.backfill_skips`) names them too, on the real dev server and
PostgreSQL.

No worker polls the job's queue, so the backfill's first run stays open and the server
skips every later slot of the range, as it does when a run takes longer than the gap
between backfilled slots: the outcome does not depend on timing.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from temporalio.client import ScheduleBackfill, ScheduleOverlapPolicy

from activities.catchup.backfills import SkipsInput, backfill_skips, slot_workflow_id
from schedules.catalog.model import load_catalog
from schedules.cli.main import build_parser
from schedules.sync.apply import sync
from tests.helpers import ROOT, assert_eventually
from tests.helpers.worker import settings_env
from tests.integration.jobs import end_open_runs

CATALOG = """\
[hourly-report]
kind = "invoice-reminders"
cron = "0 * * * *"
timezone = "UTC"
paused = true
description = "the hourly report"
owner = "ops@example.com"
"""


def run_cli(settings, catalog: Path, *args: str) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "schedules", "--catalog", str(catalog), "--without-engine", *args],
        cwd=ROOT,
        env=settings_env(settings),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout + done.stderr


@contextlib.asynccontextmanager
async def hourly_report(client, settings, tmp_path):
    """The catalog's paused hourly job synced (its catalog file, the job, the schedule's
    handle); afterwards the schedule deleted and the runs its backfills left open ended."""
    catalog = tmp_path / "jobs.toml"
    catalog.write_text(CATALOG)
    (job,) = load_catalog(catalog, engine=False)
    await sync(client, [job], settings.temporal_task_queue, prune=False)
    handle = client.get_schedule_handle(job.id)
    try:
        yield catalog, job, handle
    finally:
        await handle.delete()
        await end_open_runs(client, settings.temporal_task_queue, "hourly-report-")


def utc(instant: datetime) -> str:
    return instant.strftime("%Y-%m-%dT%H:%M:%SZ")


async def test_check_names_each_slot_a_skip_backfill_dropped_and_explain_says_why(
    client, settings, tmp_path
):
    async with hourly_report(client, settings, tmp_path) as (catalog, job, handle):
        hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        slots = [hour - timedelta(hours=n) for n in (4, 3, 2, 1)]
        # What the dialog sends: both ends inclusive, overlap Skip.
        await handle.backfill(
            ScheduleBackfill(
                start_at=slots[0], end_at=slots[-1], overlap=ScheduleOverlapPolicy.SKIP
            )
        )

        async def three_skipped():
            info = (await handle.describe()).info
            assert (info.num_actions, info.num_actions_skipped_overlap) == (1, 3)

        await assert_eventually(three_skipped, timeout=60)

        # What the run the backfill started reads of the server (its details say it).
        first = await client.get_workflow_handle(slot_workflow_id(job.id, slots[0])).describe()
        ask = SkipsInput(
            job_name=job.id, scheduled_at=slots[0], started_at=first.start_time, timing=job.timing
        )
        skips = await backfill_skips(client, ask)
        assert skips is not None and skips.skipped == slots[1:]
        assert (skips.start, skips.end, skips.overlap, skips.counted) == (
            slots[0],
            slots[-1],
            "skip",
            3,
        )
        # A run started before the backfill was requested is not one of its runs.
        before = ask.model_copy(update={"started_at": first.start_time - timedelta(hours=1)})
        assert await backfill_skips(client, before) is None

        code, out = run_cli(settings, catalog, "check", "--json")
        assert code == 1, out
        (alert,) = [a for a in json.loads(out)["alerts"] if a["kind"] == "backfill_skipped"]
        assert alert["job"] == "hourly-report"
        message = alert["message"]
        assert message.startswith("3 backfilled slot(s) skipped by the server under overlap skip")
        for slot in slots[1:]:
            assert slot.strftime("%Y-%m-%d %H:%M:%SZ") in message, message
        assert slots[0].strftime("%Y-%m-%d %H:%M:%SZ") not in message, message
        # The command it prints runs as printed: one word per time.
        argv = shlex.split(message.split("`")[1])
        assert argv[:4] == ["python", "-m", "schedules", "backfill"], argv
        args = build_parser().parse_args(argv[3:])
        assert (args.job, args.start, args.end) == (
            "hourly-report",
            utc(slots[1]),
            utc(slots[3] + timedelta(seconds=1)),
        )
        assert "Buffer All" in message

        code, out = run_cli(settings, catalog, "explain", "hourly-report", "--at", utc(slots[2]))
        assert code == 1, out
        assert "the server skipped it because of the overlap policy skip" in out, out
        assert f"--start {utc(slots[2])}" in out, out


class _Describes:
    """The test's client, counting the schedule describes made through it: each is a query
    of the scheduler workflow, which answers between its passes only."""

    def __init__(self, client) -> None:
        self._client = client
        self.described = 0

    def get_schedule_handle(self, schedule_id: str):
        handle = self._client.get_schedule_handle(schedule_id)
        describe = handle.describe

        async def counted(*args, **kwargs):
            self.described += 1
            return await describe(*args, **kwargs)

        handle.describe = counted
        return handle

    def __getattr__(self, name: str):
        return getattr(self._client, name)


async def test_a_run_of_a_backfill_that_drops_nothing_asks_the_scheduler_nothing(
    client, settings, tmp_path
):
    async with hourly_report(client, settings, tmp_path) as (_, job, handle):
        hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        slots = [hour - timedelta(hours=n) for n in (3, 2, 1)]
        # `schedules backfill`'s policy: every slot starts, none is dropped.
        await handle.backfill(
            ScheduleBackfill(
                start_at=slots[0], end_at=slots[-1], overlap=ScheduleOverlapPolicy.ALLOW_ALL
            )
        )

        async def all_started():
            info = (await handle.describe()).info
            assert (info.num_actions, info.num_actions_skipped_overlap) == (3, 0)

        await assert_eventually(all_started, timeout=60)
        spy = _Describes(client)
        for slot in slots:
            run = await client.get_workflow_handle(slot_workflow_id(job.id, slot)).describe()
            ask = SkipsInput(
                job_name=job.id, scheduled_at=slot, started_at=run.start_time, timing=job.timing
            )
            assert await backfill_skips(spy, ask) is None
        assert spy.described == 0

        # A later backfill over the same slots under Skip, which drops what meets a run:
        # a run's question then needs the server's count, and asks it once.
        await handle.backfill(
            ScheduleBackfill(
                start_at=slots[0], end_at=slots[-1], overlap=ScheduleOverlapPolicy.SKIP
            )
        )

        async def skipped():
            info = (await handle.describe()).info
            assert info.num_actions_skipped_overlap > 0

        await assert_eventually(skipped, timeout=60)
        later = ask.model_copy(update={"started_at": datetime.now(UTC)})
        skips = await backfill_skips(spy, later)
        assert skips is not None and skips.overlap == "skip"
        assert spy.described == 1
