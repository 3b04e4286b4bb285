"""`schedules sync` never does harm by accident: the prune guard, limits checked before the
first write, writes in an order a re-run converges from, one sync at a time."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError

from core.payloads import data_converter
from devstack import TemporalDevServer, free_port
from schedules.server.found import catalog_entry
from schedules.sync.plan import managed_schedule_ids
from tests.helpers import ROOT, assert_eventually
from tests.helpers.worker import schedules_cli, settings_env
from tests.integration.jobs import delete_managed, managed_become
from tests.integration.schedule_state import snapshot

# As schedules/server/sync_lock.py names them.
LOCK_WORKFLOW_ID = "scheduled-jobs-sync-lock"
LOCK_WORKFLOW_TYPE = "ScheduledJobsSyncLock"
LOCK_TASK_QUEUE = "scheduled-jobs-sync-lock"

JOB = """
[{id}]
description = "{description}"
kind = "invoice-reminders"
cron = "{cron}"
timezone = "UTC"
paused = true
"""


def catalog(tmp_path: Path, name: str, jobs: dict[str, str], description: str = "test") -> Path:
    """A catalog of paused jobs: job id -> cron."""
    path = tmp_path / name
    text = "".join(JOB.format(id=i, cron=c, description=description) for i, c in jobs.items())
    path.write_text(text)
    return path


def run_sync(settings, path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return schedules_cli(settings, "sync", *args, catalog=path, timeout=180, **env)


async def crons(client: Client, ids: set[str]) -> dict[str, str]:
    """Each schedule's cron as its catalog entry had it (the action's memo)."""
    found = {}
    for job_id in ids:
        described = await client.get_schedule_handle(job_id).describe()
        entry = await catalog_entry(client, described)
        assert entry is not None, job_id
        found[job_id] = entry["cron"]
    return found


@pytest.fixture
async def clean(client):
    """No managed schedule before or after the test, and no sync lock held."""

    async def wipe():
        await delete_managed(client)
        try:
            await client.get_workflow_handle(LOCK_WORKFLOW_ID).terminate("test cleanup")
        except RPCError:  # not running
            pass
        await managed_become(client, set())

    await wipe()
    yield
    await wipe()


# --- the prune guard ----------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "# every job moved to another file\n\n# (none here)\n"])
async def test_an_empty_catalog_deletes_nothing_and_says_what_it_would_delete(
    client, settings, tmp_path, clean, text
):
    three = catalog(tmp_path, "three.toml", {f"kept-{i}": f"0 {i} * * *" for i in range(3)})
    assert run_sync(settings, three).returncode == 0
    await managed_become(client, {"kept-0", "kept-1", "kept-2"})
    before = await snapshot(client, {"kept-0", "kept-1", "kept-2"})
    empty = tmp_path / "empty.toml"
    empty.write_text(text)

    refused = run_sync(settings, empty)
    assert refused.returncode == 2, refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert line == (
        "error: sync refused: it would delete 3 of the 3 schedule(s) this project manages "
        "(100%), more than --max-prune 50% allows: kept-0, kept-1, kept-2. Nothing was "
        "changed. Is this the right catalog? To delete them, run again with --max-prune "
        "100; to keep them, --no-prune"
    )
    assert refused.stdout == ""

    dry = run_sync(settings, empty, "--dry-run")
    assert dry.returncode == 2
    assert dry.stdout.splitlines() == [
        "would delete  kept-0",
        "would delete  kept-1",
        "would delete  kept-2",
    ]
    assert dry.stderr.strip() == line
    assert await snapshot(client, {"kept-0", "kept-1", "kept-2"}) == before

    allowed = run_sync(settings, empty, "--max-prune", "100")
    assert allowed.returncode == 0, allowed.stderr
    assert "deleted       kept-2" in allowed.stdout
    await managed_become(client, set())


async def test_more_than_the_stated_share_is_refused_and_a_smaller_prune_goes_through(
    client, settings, tmp_path, clean
):
    four = {f"share-{i}": f"0 {i} * * *" for i in range(4)}
    assert run_sync(settings, catalog(tmp_path, "four.toml", four)).returncode == 0
    await managed_become(client, set(four))
    one = catalog(tmp_path, "one.toml", {"share-0": "0 0 * * *"})
    refused = run_sync(settings, one)  # 3 of 4
    assert refused.returncode == 2
    assert "it would delete 3 of the 4 schedule(s) this project manages (75%)" in refused.stderr
    loose = run_sync(settings, one, "--max-prune", "75")
    assert loose.returncode == 0, loose.stderr
    await managed_become(client, {"share-0"})


# --- limits before the first write --------------------------------------------------------


async def test_what_temporal_would_refuse_is_refused_before_any_write(
    client, settings, tmp_path, clean
):
    start = catalog(tmp_path, "start.toml", {"limits-a": "0 1 * * *", "limits-b": "0 2 * * *"})
    assert run_sync(settings, start).returncode == 0
    await managed_become(client, {"limits-a", "limits-b"})
    ids = {"limits-a", "limits-b", "limits-new"}
    before = await snapshot(client, ids)

    # A changed job, a new one, a dropped one (so sync would create, update and delete),
    # and one job that Temporal would refuse.
    big = tmp_path / "big.toml"
    big.write_text(
        JOB.format(id="limits-a", cron="0 5 * * *", description="changed")
        + JOB.format(id="limits-new", cron="0 6 * * *", description="new")
        + JOB.format(id="limits-huge", cron="0 7 * * *", description="x" * 2_000_000)
    )
    refused = run_sync(settings, big)
    assert refused.returncode == 2, refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("error: job 'limits-huge': its schedule is 2,00")
    assert "largest: description 2,000,002 bytes" in line and line.endswith("nothing was changed")

    long_id = tmp_path / "long.toml"
    long_id.write_text(
        JOB.format(id="limits-a", cron="0 5 * * *", description="changed")
        + JOB.format(id="x" * 2001, cron="0 7 * * *", description="long id")
    )
    refused = run_sync(settings, long_id)
    assert refused.returncode == 2
    (line,) = refused.stderr.strip().splitlines()
    assert "id: is 2001 characters; a job id may have at most 973" in line
    assert "Traceback" not in refused.stderr
    assert await snapshot(client, ids) == before
    assert run_sync(settings, big, "--dry-run").returncode == 2  # validate and dry run agree
    validate = subprocess.run(
        [sys.executable, "-m", "schedules", "--catalog", str(big), "--without-engine", "validate"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert validate.returncode == 2 and "limits-huge" in validate.stderr


async def test_a_write_the_server_refuses_stops_before_any_delete_and_says_what_was_applied(
    tmp_path, settings
):
    # A server with a lower id limit than Temporal's default: a 90-character job id passes
    # validation and is refused by the server, after other writes of the same sync.
    server = TemporalDevServer(
        free_port(), None, None, tmp_path / "strict.log", dynamic_config={"limit.maxIDLength": 100}
    )
    long_id = "part-" + "l" * 85
    server.start()
    try:
        await server.wait_ready()
        client = await Client.connect(server.address, data_converter=data_converter)
        strict = settings.model_copy(update={"temporal_address": server.address})
        first = catalog(tmp_path, "first.toml", {"part-keep": "0 1 * * *", "part-old": "0 2 * * *"})
        assert run_sync(strict, first).returncode == 0

        second = tmp_path / "second.toml"
        second.write_text(
            JOB.format(id="part-keep", cron="0 3 * * *", description="changed")
            + JOB.format(id="part-new", cron="0 4 * * *", description="new")
            + JOB.format(id=long_id, cron="0 5 * * *", description="too long for this server")
        )
        stopped = run_sync(strict, second)
        assert stopped.returncode == 1, stopped.stderr
        assert sorted(stopped.stdout.splitlines()) == [
            f"FAILED        create {long_id}",
            "applied       create part-new",
            "applied       update part-keep",
            "not attempted delete part-old",
        ]
        (line,) = stopped.stderr.strip().splitlines()
        assert line.startswith("error: sync stopped part-way: 2 of 4 change(s) applied")
        assert f"create {long_id} failed: INVALID_ARGUMENT: WorkflowId exceeds maximum " in line
        assert "not attempted: delete part-old" in line
        assert "cannot reach" not in line
        # What was applied is there, what was not is not, and nothing was deleted.
        ids = await managed_schedule_ids(client)
        assert {"part-keep", "part-new", "part-old"} <= ids and long_id not in ids
        assert (await crons(client, {"part-keep"})) == {"part-keep": "0 3 * * *"}

        # With the job renamed, a re-run converges: the delete happens now.
        fixed = tmp_path / "fixed.toml"
        fixed.write_text(second.read_text().replace(long_id, "part-short"))
        again = run_sync(strict, fixed)
        assert again.returncode == 0, again.stderr
        assert again.stdout.splitlines() == ["created       part-short", "deleted       part-old"]
    finally:
        server.stop()


# --- one sync at a time -------------------------------------------------------------------


async def test_five_syncs_of_different_catalogs_at_once_leave_exactly_the_last_one(
    client, settings, tmp_path, clean
):
    started = datetime.now(UTC) - timedelta(seconds=1)
    catalogs = {}
    for n in range(5):
        jobs = {f"conc-{j}": f"{n} {j + 1} * * *" for j in range(3)} | {
            f"conc-own-{n}": "0 9 * * *"
        }
        catalogs[n] = (catalog(tmp_path, f"c{n}.toml", jobs), jobs)
    processes = {
        n: subprocess.Popen(
            [
                sys.executable,
                "-m",
                "schedules",
                "--catalog",
                str(path),
                "--without-engine",
                "sync",
                "--lock-wait",
                "170",
            ],
            cwd=ROOT,
            env=settings_env(settings),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n, (path, _) in catalogs.items()
    }
    outputs = {n: p.communicate(timeout=180) for n, p in processes.items()}
    for n, p in processes.items():
        assert p.returncode == 0, outputs[n][1]  # each waited its turn, then applied cleanly

    # The schedules are exactly one of the five catalogs: every job of it, with its crons,
    # and nothing of the others.
    async def exactly_one_catalog():
        ids = await managed_schedule_ids(client)
        now = await crons(client, ids)
        matching = [n for n, (_, jobs) in catalogs.items() if jobs == now]
        assert len(matching) == 1, now
        return matching[0]

    await assert_eventually(exactly_one_catalog, timeout=20)

    # Each released the lock by deleting its run: no finished sync leaves a lock workflow
    # in the UI's lists (none of the five is listed, running or closed).
    async def no_locks_listed():
        runs = [
            run
            async for run in client.list_workflows(f'WorkflowId = "{LOCK_WORKFLOW_ID}"')
            if run.start_time >= started
        ]
        assert runs == []

    await assert_eventually(no_locks_listed, timeout=20)


async def test_a_held_lock_fails_a_sync_naming_its_holder_and_a_crashed_holders_lock_expires(
    client, settings, tmp_path, clean
):
    async def crashed_holder(lease: int):
        """A sync that died holding the lock: the lock workflow, its lease `lease` seconds."""
        return await client.start_workflow(
            LOCK_WORKFLOW_TYPE,
            id=LOCK_WORKFLOW_ID,
            task_queue=LOCK_TASK_QUEUE,
            execution_timeout=timedelta(seconds=lease),
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            memo={"holder": "deploy-host:4242", "lease_seconds": lease},
        )

    # Held for as long as the refused sync can take on a loaded machine.
    held = await crashed_holder(600)
    path = catalog(tmp_path, "lock.toml", {"locked-job": "0 1 * * *"})
    busy = run_sync(settings, path, "--lock-wait", "0")
    assert busy.returncode == 1
    (line,) = busy.stderr.strip().splitlines()
    assert line.startswith(
        "error: another sync is running in this namespace: the sync lock is held by "
        "deploy-host:4242 (since "
    )
    assert "lease ends" in line and "nothing was changed" in line
    assert "locked-job" not in await managed_schedule_ids(client)
    await held.terminate()

    # A crashed holder's short lease runs out; a sync that waits for it then applies.
    await crashed_holder(4)
    waited = run_sync(settings, path, "--lock-wait", "60")
    assert waited.returncode == 0, waited.stderr
    assert waited.stdout.strip() == "created       locked-job"


def test_sync_lock_settings_and_arguments_are_checked(settings, tmp_path):
    path = tmp_path / "any.toml"
    path.write_text(JOB.format(id="any-job", cron="0 1 * * *", description="x"))
    for args, env, expected in [
        (["--lock-wait", "-1"], {}, "--lock-wait: must be a number of seconds from 0 to 86400"),
        (["--max-prune", "150"], {}, "--max-prune: must be a percentage from 0 to 100"),
        ([], {"SYNC_LOCK_SECONDS": "5"}, "SYNC_LOCK_SECONDS: Input should be greater than"),
    ]:
        done = run_sync(settings, path, *args, **env)
        assert done.returncode == 2, (args, done.stderr)
        assert expected in done.stderr and "Traceback" not in done.stderr
