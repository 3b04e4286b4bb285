"""`python -m schedules sync` against the real dev server."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from temporalio.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleDescription,
    ScheduleSpec,
    ScheduleUpdate,
)
from temporalio.testing import ActivityEnvironment

from activities.catchup.missed import CatchupActivities, PlanInput, PlanResult
from core.errors import CatalogError
from schedules.catalog.compile import MANAGED_MEMO_KEY, MANAGED_MEMO_VALUE, compile_schedule
from schedules.catalog.files import engine_catalog
from schedules.catalog.model import JobSpec, load_catalog, parse_catalog
from schedules.sync.apply import sync
from schedules.sync.plan import plan
from schedules.sync.safety import SyncIncompleteError
from tests.helpers import ROOT, assert_eventually, python_m
from tests.helpers.worker import schedules_cli
from tests.integration.jobs import delete_managed, managed_become
from workflows import JobRun

JOB = """
[{id}]
description = "test job"
owner = "tests"
kind = "invoice-reminders"
cron = "{cron}"
timezone = "{tz}"
catchup = "latest"
"""

# The module, not `schedules.sync`: the public API exports a function `sync` there, which
# a dotted monkeypatch path would walk into.
SYNC_APPLY = importlib.import_module("schedules.sync.apply")


def catalog(tmp_path: Path, *jobs: tuple[str, str, str], name: str = "jobs.toml") -> Path:
    path = tmp_path / name
    path.write_text("".join(JOB.format(id=i, cron=c, tz=tz) for i, c, tz in jobs))
    return path


async def listing_shows_paused(client, job_id: str) -> None:
    async def check():
        async for entry in await client.list_schedules():
            if entry.id == job_id:
                assert entry.schedule.state.paused
                return
        raise AssertionError(f"{job_id} is not listed yet")

    await assert_eventually(check, timeout=20)


async def last_updated(client, ids) -> dict[str, datetime | None]:
    handles = [client.get_schedule_handle(job_id) for job_id in ids]
    return {h.id: (await h.describe()).info.last_updated_at for h in handles}


@pytest.fixture
async def clean(client):
    """Delete every managed schedule before and after the test."""

    await delete_managed(client)
    yield
    await delete_managed(client)


async def test_create_then_no_change_then_field_level_dry_run(client, settings, tmp_path, clean):
    path = catalog(tmp_path, ("nightly-a", "30 2 * * *", "Europe/London"))
    first = schedules_cli(settings, "--catalog", str(path), "--without-engine", "sync")
    assert first.returncode == 0, first.stderr
    assert "created       nightly-a" in first.stdout
    handle = client.get_schedule_handle("nightly-a")
    described = await handle.describe()
    assert await described.memo_value("managed-by") == "scheduled-jobs"
    assert described.schedule.action.task_queue == settings.temporal_task_queue
    upcoming = [t.astimezone(ZoneInfo("Europe/London")) for t in described.info.next_action_times]
    assert upcoming and {(t.hour, t.minute) for t in upcoming} == {(2, 30)}

    again = schedules_cli(settings, "--catalog", str(path), "--without-engine", "sync")
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "no changes"
    assert (await handle.describe()).info.last_updated_at == described.info.last_updated_at

    changed = catalog(tmp_path, ("nightly-a", "0 3 * * *", "Europe/London"), name="changed.toml")
    dry = schedules_cli(
        settings, "--catalog", str(changed), "--without-engine", "sync", "--dry-run"
    )
    assert dry.returncode == 0, dry.stderr
    assert "would update  nightly-a" in dry.stdout
    assert "    cron: '30 2 * * *' -> '0 3 * * *'" in dry.stdout
    assert (await handle.describe()).info.last_updated_at == described.info.last_updated_at


async def test_changing_the_cron_neither_fires_an_extra_run_nor_loses_the_next(
    client, settings, tmp_path, clean
):
    def every(minutes: int) -> str:
        # Overlap allow_all: with no worker, a run that fired stays open; under skip it
        # would keep later fire times from starting, and hide whether they were lost.
        return JOB.format(id="every-few", cron=f"*/{minutes} * * * *", tz="UTC") + (
            'overlap = "allow_all"\n'
        )

    path = tmp_path / "jobs.toml"
    path.write_text(every(2))
    assert (
        schedules_cli(settings, "--catalog", str(path), "--without-engine", "sync").returncode == 0
    )
    handle = client.get_schedule_handle("every-few")

    changed = tmp_path / "changed.toml"
    changed.write_text(every(3))
    done = schedules_cli(settings, "--catalog", str(changed), "--without-engine", "sync")
    assert done.returncode == 0 and "updated       every-few" in done.stdout
    after = await handle.describe()
    (run,) = await client.data_converter.decode(after.schedule.action.args, [JobRun])
    since = run.timing_since  # the server's time of applying */3
    assert not run.timing_pending and since <= after.info.last_updated_at
    # No extra run: whatever fired is a */2 time from before the change or a */3 one after.
    for action in after.info.recent_actions:
        fired = action.scheduled_at
        assert fired.second == 0, fired
        assert (fired <= since and fired.minute % 2 == 0) or (
            fired > since and fired.minute % 3 == 0
        ), (fired, since)
    # The next one is kept: the first */3 time after the change fired or is the next due.
    first = croniter("*/3 * * * *", since).get_next(datetime)
    fired = {a.scheduled_at for a in after.info.recent_actions}
    assert first in fired or after.info.next_action_times[0] == first


async def test_operator_pause_is_kept_and_reported_as_drift(client, settings, tmp_path, clean):
    path = catalog(tmp_path, ("pausable", "0 4 * * *", "UTC"))
    assert (
        schedules_cli(settings, "--catalog", str(path), "--without-engine", "sync").returncode == 0
    )
    handle = client.get_schedule_handle("pausable")
    await handle.pause(note="paused by on-call: ledger migration")
    await listing_shows_paused(client, "pausable")  # sync reads the pause from the listing
    done = schedules_cli(settings, "--catalog", str(path), "--without-engine", "sync")
    assert done.returncode == 0, done.stderr
    assert "drift         pausable: paused on the server (paused by on-call" in done.stdout
    state = (await handle.describe()).schedule.state
    assert state.paused and state.note == "paused by on-call: ledger migration"


async def test_the_engines_jobs_come_with_a_catalog_and_no_sync_prunes_them(
    client, settings, tmp_path, clean
):
    engine = sorted(engine_catalog())
    # A catalog may restate the engine's jobs with their kinds, to tune them: here paused,
    # so that no dispatch tick or relay run fires on this test's server.
    tuned = "".join(
        f'[{job_id}]\nkind = "{table["kind"]}"\ncron = "0 0 1 1 *"\ntimezone = "UTC"\n'
        "paused = true\n"
        + "".join(
            f"params.{key} = {json.dumps(value)}\n"
            for key, value in table.get("params", {}).items()
        )
        for job_id, table in engine_catalog().items()
    )
    first = catalog(tmp_path, ("mine-a", "0 1 * * *", "UTC"))
    first.write_text(first.read_text() + tuned)
    done = schedules_cli(settings, "--catalog", str(first), "sync")
    assert done.returncode == 0, done.stderr
    await managed_become(client, {"mine-a", *engine})
    # A catalog without them, read without the engine's: the sync prunes the catalog's own
    # schedule that it no longer has, never the engine's.
    second = catalog(tmp_path, ("mine-b", "0 1 * * *", "UTC"), name="second.toml")
    done = schedules_cli(settings, "--catalog", str(second), "--without-engine", "sync")
    assert done.returncode == 0, done.stderr
    assert "deleted       mine-a" in done.stdout and "runtime-dispatch" not in done.stdout
    await managed_become(client, {"mine-b", *engine})
    described = await client.get_schedule_handle("outbox-relay").describe()
    assert described.schedule.state.paused


async def test_removed_jobs_are_deleted_unless_no_prune_and_foreign_schedules_untouched(
    client, settings, tmp_path, clean
):
    both = catalog(tmp_path, ("keep-me", "0 1 * * *", "UTC"), ("drop-me", "0 2 * * *", "UTC"))
    assert (
        schedules_cli(settings, "--catalog", str(both), "--without-engine", "sync").returncode == 0
    )
    await client.create_schedule(
        "someone-elses",
        Schedule(
            action=ScheduleActionStartWorkflow("OtherWorkflow", id="x", task_queue="other"),
            spec=ScheduleSpec(cron_expressions=["0 0 * * *"]),
        ),
    )
    try:
        one = catalog(tmp_path, ("keep-me", "0 1 * * *", "UTC"), name="one.toml")
        kept = schedules_cli(
            settings, "--catalog", str(one), "--without-engine", "sync", "--no-prune"
        )
        assert kept.stdout.strip() == "no changes"
        await managed_become(client, {"keep-me", "drop-me"})

        pruned = schedules_cli(settings, "--catalog", str(one), "--without-engine", "sync")
        assert "deleted       drop-me" in pruned.stdout
        await managed_become(client, {"keep-me"})
        assert (await client.get_schedule_handle("someone-elses").describe()).schedule
    finally:
        await client.get_schedule_handle("someone-elses").delete()


async def test_sync_refuses_a_schedule_it_does_not_manage(client, task_queue, tmp_path, clean):
    await client.create_schedule(
        "taken-id",
        Schedule(
            action=ScheduleActionStartWorkflow("SomeoneElsesWorkflow", id="x", task_queue="other"),
            spec=ScheduleSpec(cron_expressions=["0 0 * * *"]),
        ),
    )
    handle = client.get_schedule_handle("taken-id")
    try:
        jobs = load_catalog(catalog(tmp_path, ("taken-id", "0 1 * * *", "UTC")), engine=False)
        with pytest.raises(CatalogError, match="not managed by this project"):
            await sync(client, jobs, task_queue)
        assert (await handle.describe()).schedule.action.workflow == "SomeoneElsesWorkflow"
    finally:
        await handle.delete()


async def test_two_syncs_at_once_converge(client, task_queue, tmp_path, clean):
    jobs = load_catalog(
        catalog(tmp_path, *[(f"job-{i}", f"{i} 3 * * *", "America/New_York") for i in range(10)]),
        engine=False,
    )
    first, second = await asyncio.gather(
        sync(client, jobs, task_queue), sync(client, jobs, task_queue)
    )
    # Each job was created by one of them; where both planned to create, the loser of the
    # race updated to the same result instead of failing.
    assert set(first.created) | set(second.created) == {job.id for job in jobs}
    await managed_become(client, {job.id for job in jobs})
    third = await sync(client, jobs, task_queue)
    assert third.created == third.updated == third.deleted == []


async def test_an_invalid_catalog_changes_nothing_and_exits_2(client, settings, tmp_path, clean):
    good = catalog(tmp_path, ("fine-job", "0 1 * * *", "UTC"))
    assert (
        schedules_cli(settings, "--catalog", str(good), "--without-engine", "sync").returncode == 0
    )
    bad = tmp_path / "bad.toml"
    bad.write_text(
        good.read_text().replace("0 1 * * *", "0 5 * * *")
        + JOB.format(id="broken", cron="99 * * * *", tz="Mars/Olympus")
    )
    done = schedules_cli(settings, "--catalog", str(bad), "--without-engine", "sync")
    assert done.returncode == 2
    assert "job 'broken': cron" in done.stderr and "job 'broken': timezone" in done.stderr
    await managed_become(client, {"fine-job"})
    described = await client.get_schedule_handle("fine-job").describe()
    assert described.info.next_action_times[0].hour == 1  # not updated to 05:00


async def test_a_no_change_sync_describes_nothing_yet_still_sees_a_pause(
    client, task_queue, tmp_path, clean
):
    jobs = load_catalog(
        catalog(
            tmp_path,
            *[(f"quiet-{i}", f"{i} 5 * * *", "Europe/Berlin") for i in range(4)],
            ("quiet-dst", "30 2 * * *", "America/New_York"),  # compiled to UTC calendars
        ),
        engine=False,
    )
    ids = {job.id for job in jobs}
    # One clock for every sync: quiet-dst's UTC calendars cover the years from their clock's
    # on, so a sync in a new year (New York's) rewrites it, and one straddling its New Year
    # (05:00Z) would update a job this test says is unchanged.
    now = datetime.now(UTC)
    assert set((await sync(client, jobs, task_queue, now=now)).created) == ids
    await managed_become(client, ids)
    before = await last_updated(client, ids)

    async def trusted():  # once the listing (visibility) shows each job's final digest
        again = await sync(client, jobs, task_queue, now=now)
        assert again.created == again.updated == again.deleted == [] and not again.drift
        assert again.described == 0  # the listed digests vouched for every job

    await assert_eventually(trusted, timeout=20)
    assert await last_updated(client, ids) == before

    await client.get_schedule_handle("quiet-2").pause(note="on-call: disk full")
    await listing_shows_paused(client, "quiet-2")
    paused = await sync(client, jobs, task_queue, now=now)
    assert [c.job_id for c in paused.drift] == ["quiet-2"] and "on-call: disk full" in (
        paused.drift[0].drift[0]
    )
    assert paused.updated == [] and paused.described == 0
    assert (await client.get_schedule_handle("quiet-2").describe()).schedule.state.paused


async def test_sync_trusts_the_digest_over_an_edit_made_by_hand_and_full_undoes_it(
    client, settings, tmp_path, clean
):
    path = catalog(tmp_path, ("edited-by-hand", "0 6 * * *", "UTC"))
    assert (
        schedules_cli(settings, "--catalog", str(path), "--without-engine", "sync").returncode == 0
    )
    handle = client.get_schedule_handle("edited-by-hand")
    await handle.update(
        lambda given: ScheduleUpdate(
            schedule=dataclasses.replace(
                given.description.schedule, spec=ScheduleSpec(cron_expressions=["0 7 * * *"])
            )
        )
    )
    edited = (await handle.describe()).info.last_updated_at

    # Documented: the edit keeps the schedule's digest, so sync does not look at it again.
    trusting = schedules_cli(settings, "--catalog", str(path), "--without-engine", "sync")
    assert trusting.returncode == 0 and trusting.stdout.strip() == "no changes"
    assert (await handle.describe()).info.last_updated_at == edited

    full = schedules_cli(settings, "--catalog", str(path), "--without-engine", "sync", "--full")
    assert full.returncode == 0, full.stderr
    assert "updated       edited-by-hand\n    calendars: " in full.stdout
    assert (await handle.describe()).info.next_action_times[0].hour == 6
    again = schedules_cli(settings, "--catalog", str(path), "--without-engine", "sync", "--full")
    assert again.stdout.strip() == "no changes"


async def test_a_schedule_from_before_the_digest_gets_one_then_is_trusted(
    client, task_queue, tmp_path, clean
):
    (job,) = load_catalog(catalog(tmp_path, ("from-before", "0 8 * * *", "UTC")), engine=False)
    await client.create_schedule(
        job.id,
        compile_schedule(job, task_queue, datetime.now(UTC)),
        memo={MANAGED_MEMO_KEY: MANAGED_MEMO_VALUE},
    )
    await managed_become(client, {job.id})
    stamped = await sync(client, [job], task_queue)
    assert stamped.updated == [job.id] and list(stamped.changes[0].fields) == ["digest"]

    async def trusted():
        report = await sync(client, [job], task_queue)
        assert report.updated == [] and report.described == 0

    await assert_eventually(trusted, timeout=20)


async def test_without_the_digest_attribute_sync_describes_every_job(
    client, task_queue, tmp_path, clean, monkeypatch
):
    async def unusable(client, register):  # a hosted namespace without operator permissions
        return False

    monkeypatch.setattr(SYNC_APPLY, "digest_attribute", unusable)
    jobs = load_catalog(
        catalog(tmp_path, *[(f"plain-{i}", f"0 {i} * * *", "UTC") for i in range(3)]),
        engine=False,
    )
    assert len((await sync(client, jobs, task_queue)).created) == 3
    await managed_become(client, {job.id for job in jobs})
    again = await sync(client, jobs, task_queue)
    assert again.updated == again.created == [] and again.described == 3


def test_sync_with_temporal_unreachable_fails_with_one_line():
    env = {k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_")}
    env["TEMPORAL_ADDRESS"] = "127.0.0.1:1"
    done = python_m(["schedules", "--wait-for-cluster", "2", "sync"], env, timeout=60)
    assert done.returncode == 1
    # One line says what it waits for.
    waiting, error = done.stderr.strip().splitlines()
    assert waiting.startswith("waiting up to 2s (--wait-for-cluster) for Temporal at 127.0.0.1:1")
    assert error.startswith("error: cannot reach Temporal at 127.0.0.1:1 within 2s")
    assert "Traceback" not in done.stderr


def test_help_of_every_command_names_its_exit_codes():
    commands = ["validate", "sync"]
    for command in [[], *([c] for c in commands)]:
        done = subprocess.run(
            [sys.executable, "-m", "schedules", *command, "--help"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0 and "exit codes" in done.stdout, command


def ticking_job(every: int = 4, **fields) -> JobSpec:
    """A paused every-`every`-seconds job: plenty of fire times, none of them fired."""
    (job,) = parse_catalog(
        {
            "ticking": {
                "kind": "invoice-reminders",
                "interval": f"{every}s",
                "timezone": "UTC",
                "catchup": "all",
                "max_missed": 100,
                "paused": True,
                "note": "test: never fires",
            }
            | fields
        }
    )
    return job


async def stored_run(client, job_id: str) -> tuple[JobRun, ScheduleDescription]:
    described = await client.get_schedule_handle(job_id).describe()
    (run,) = await client.data_converter.decode(described.schedule.action.args, [JobRun])
    return run, described


async def first_run_plan(pool, run: JobRun, after: datetime, every: int) -> PlanResult:
    """What the first scheduled run after `after` plans, started on time (its slot from an
    independent grid: every `every` seconds from the epoch)."""
    slot = datetime.fromtimestamp((after.timestamp() // every + 1) * every, UTC)
    plan = PlanInput(
        job_name=run.job_name,
        scheduled_at=slot,
        started_at=slot,
        workflow_id=f"{run.job_name}-{slot:%Y-%m-%dT%H:%M:%SZ}",
        run_id="run-1",
        timing=run.timing,
        catchup=run.catchup,
        max_missed=run.max_missed,
        timing_since=run.timing_since,
        timing_pending=run.timing_pending,
    )
    activities = CatchupActivities(pool, clock=lambda: slot + timedelta(seconds=1))
    return await ActivityEnvironment().run(activities.plan_run, plan)


async def test_timing_since_is_the_servers_own_time_of_applying_the_timing(
    client, task_queue, pool, clean
):
    # A sync whose clock read a minute before the server applied its writes (a slow sync,
    # a busy server): no fire time of that minute may count as missed.
    job = ticking_job()
    await sync(client, [job], task_queue, now=datetime.now(UTC) - timedelta(minutes=1))
    run, described = await stored_run(client, job.id)
    assert run.timing_since == described.info.created_at
    assert not run.timing_pending
    first = await first_run_plan(pool, run, described.info.created_at, every=4)
    assert (first.run, first.skipped, first.origin) == ([first.run[0]], 0, "scheduled")

    # A new timing: in force from the server's time of the write that applied it.
    changed = ticking_job(every=6)
    before = datetime.now(UTC)
    report = await sync(client, [changed], task_queue, now=before - timedelta(hours=1))
    assert report.updated == [job.id]
    run, described = await stored_run(client, job.id)
    assert before <= run.timing_since <= described.info.last_updated_at
    assert not run.timing_pending
    first = await first_run_plan(pool, run, run.timing_since, every=6)
    assert (first.skipped, first.origin) == (0, "scheduled")


async def test_a_sync_stopped_between_its_two_writes_is_finished_by_the_next(
    client, task_queue, pool, clean, monkeypatch
):
    job = ticking_job()
    write = SYNC_APPLY._update

    async def stop_before_stamping(client, target, stamp, *, stamp_timing=False):
        if stamp_timing:
            raise RuntimeError("sync stopped")
        await write(client, target, stamp)

    monkeypatch.setattr(SYNC_APPLY, "_update", stop_before_stamping)
    # The failure is reported as a sync that stopped part-way, which the next one finishes.
    with pytest.raises(
        SyncIncompleteError, match="create ticking failed: RuntimeError: sync stopped"
    ):
        await sync(client, [job], task_queue)
    pending, described = await stored_run(client, job.id)
    assert pending.timing_pending
    applied = described.info.last_updated_at or described.info.created_at
    # Runs meanwhile count no missed time, however early the provisional stamp.
    early = pending.model_copy(update={"timing_since": applied - timedelta(hours=1)})
    first = await first_run_plan(pool, early, applied, every=4)
    assert (first.skipped, first.origin) == (0, "scheduled")
    monkeypatch.undo()

    report, _ = await plan(client, [job], task_queue)
    (change,) = report.changes
    assert change.action == "update" and change.fields == {"timing_since": ("pending", applied)}
    assert (await sync(client, [job], task_queue)).updated == [job.id]
    run, _ = await stored_run(client, job.id)
    assert not run.timing_pending and run.timing_since == applied
    again = await sync(client, [job], task_queue)
    assert again.created == again.updated == again.deleted == []
