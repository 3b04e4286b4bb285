"""The operator commands (`python -m schedules list | describe | next | trigger | backfill |
pause | resume`) against the real dev server, PostgreSQL and worker processes."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from temporalio.service import RPCError, RPCStatusCode

from schedules.catalog.model import load_catalog
from schedules.server.actions import trigger
from schedules.server.state import OperationError
from schedules.sync.apply import sync
from schedules.sync.plan import managed_schedule_ids
from tests.helpers import ROOT, assert_eventually
from tests.helpers.worker import schedules_cli
from tests.integration.jobs import executions, runs_completed

NEW_YORK = ZoneInfo("America/New_York")
# For jobs a test triggers or backfills: no run of their own may join the test's (a trigger
# or backfill still runs a paused schedule).
QUIET = {"paused": True, "note": "test: triggered and backfilled runs only"}


def write_catalog(tmp_path: Path, **jobs: dict[str, str]) -> Path:
    """A catalog of invoice-reminders jobs: job id -> its timing fields."""
    path = tmp_path / "jobs.toml"
    text = ""
    for job_id, fields in jobs.items():
        text += f'[{job_id}]\nkind = "invoice-reminders"\ndescription = "operator test"\n'
        text += "".join(f"{name} = {json.dumps(value)}\n" for name, value in fields.items())
    path.write_text(text)
    return path


def run_cli(settings, catalog: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return schedules_cli(settings, *args, catalog=catalog, **env)


@pytest.fixture
async def synced(client, task_queue):
    """Sync catalog jobs onto the server for the test (never pruning anyone else's);
    delete their schedules and stop their runs afterwards."""
    created: list[str] = []

    async def put(catalog: Path, *job_ids: str) -> None:
        jobs = [job for job in load_catalog(catalog, engine=False) if job.id in job_ids]
        await sync(client, jobs, task_queue, prune=False)
        created.extend(job.id for job in jobs)

    yield put
    for job_id in created:
        handle = client.get_schedule_handle(job_id)
        try:
            described = await handle.describe()
            await handle.delete()
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            continue
        for action in described.info.running_actions:
            try:
                await client.get_workflow_handle(action.workflow_id).terminate("test cleanup")
            except RPCError as err:  # finished since
                if err.status != RPCStatusCode.NOT_FOUND:
                    raise


def insert_execution(db, job: str, scheduled_at: datetime, status: str = "completed") -> None:
    db.execute(
        "INSERT INTO job_executions"
        " (job_name, scheduled_at, status, origin, attempt, finished_at)"
        " VALUES (%s, %s, %s, 'scheduled', 1, now() + interval '3 seconds')",
        (job, scheduled_at, status),
    )


async def test_list_shows_schedules_next_and_last_runs_and_pauses(
    client, settings, db, tmp_path, synced
):
    # op-list-a starts firing tomorrow: its next run cannot change while the test looks.
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)
    catalog = write_catalog(
        tmp_path,
        **{
            "op-list-a": {
                "cron": "30 2 * * *",
                "timezone": "America/New_York",
                "start_at": tomorrow.isoformat(),
            },
            "op-list-b": {"interval": "15m", "timezone": "UTC"},
        },
    )
    await synced(catalog, "op-list-a")
    await client.get_schedule_handle("op-list-a").pause(note="ledger migration")
    last = datetime(2026, 11, 20, 7, 30, tzinfo=UTC)
    insert_execution(db, "op-list-a", last - timedelta(days=1))
    insert_execution(db, "op-list-a", last, status="failed")

    done = run_cli(settings, catalog, "list")
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines()}
    assert "NEXT RUN (UTC)" in lines["JOB"]
    assert "America/New_York" in lines["op-list-a"]
    assert "paused: ledger migration  -" in lines["op-list-a"]  # no next run while paused
    assert "2026-11-20 02:30 EST  failed" in lines["op-list-a"]
    assert lines["op-list-a"].endswith("yes: ledger migration")
    assert "not synced" in lines["op-list-b"] and "never ran" in lines["op-list-b"]

    as_json = run_cli(settings, catalog, "list", "--json")
    assert as_json.returncode == 0, as_json.stderr
    jobs = {job["id"]: job for job in json.loads(as_json.stdout)["jobs"]}
    a, b = jobs["op-list-a"], jobs["op-list-b"]
    assert (a["paused"], a["note"], a["next_run"]) == (True, "ledger migration", None)
    assert a["last_run"]["status"] == "failed"
    assert a["last_run"]["scheduled_at"]["utc"] == "2026-11-20T07:30:00Z"
    assert (b["synced"], b["next_run"], b["last_run"]) == (False, None, None)


async def test_list_names_the_servers_schedules_the_catalog_does_not_have(
    client, settings, tmp_path, synced
):
    """A schedule of this project that the given catalog lacks (another catalog's, or one
    left over) is named under the table, not hidden; an invalid entry of the catalog is
    the catalog's all the same."""
    held = {"cron": "0 1 * * *", "timezone": "UTC", **QUIET}
    every = write_catalog(tmp_path, **{f"op-held-{x}": held for x in "abc"})
    await synced(every, "op-held-a", "op-held-b", "op-held-c")
    (tmp_path / "one").mkdir()
    one = write_catalog(
        tmp_path / "one", **{"op-held-a": held, "op-held-c": held | {"cron": "61 * * * *"}}
    )

    async def all_listed():  # the server's listing (visibility) lags a sync
        assert {"op-held-a", "op-held-b", "op-held-c"} <= await managed_schedule_ids(client)

    await assert_eventually(all_listed, timeout=30)
    listed = run_cli(settings, one, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    others = json.loads(listed.stdout)["not_in_catalog"]
    assert "op-held-b" in others, others
    assert "op-held-a" not in others and "op-held-c" not in others  # c: invalid, left out
    text = run_cli(settings, one, "list")
    assert text.returncode == 0, text.stderr
    (line,) = [line for line in text.stdout.splitlines() if line.startswith("the server also")]
    assert "schedule(s) of this project that this catalog does not have: " in line, line


async def test_describe_shows_catalog_server_and_executions(client, settings, db, tmp_path, synced):
    # Unpaused, yet nothing fires while the test looks: it starts firing the day after.
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)
    catalog = write_catalog(
        tmp_path,
        **{
            "op-describe": {
                "cron": "0 4 * * *",
                "timezone": "Europe/London",
                "start_at": tomorrow.isoformat(),
            }
        },
    )
    await synced(catalog, "op-describe")
    for day in range(12):
        insert_execution(db, "op-describe", datetime(2026, 11, 1 + day, 4, tzinfo=UTC))

    done = run_cli(settings, catalog, "describe", "op-describe")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert text.startswith("op-describe: operator test")
    assert any(line.split() == ["cron", "0", "4", "*", "*", "*"] for line in text.splitlines())
    assert "  paused        no" in text
    assert "next runs" in text and "recent runs   none" in text
    assert "  runs          12 completed, 0 failed, 0 skipped\n" in text
    assert "  last success  2026-11-12 04:00 GMT  2026-11-12T04:00:00Z\n" in text
    assert "  last failure  never\n" in text
    assert "executions (newest 10, from PostgreSQL)" in text
    assert "2026-11-12 04:00 GMT  2026-11-12T04:00:00Z  completed" in text
    assert "2026-11-02T04:00:00Z" not in text  # only the newest 10

    as_json = json.loads(run_cli(settings, catalog, "describe", "op-describe", "--json").stdout)
    assert as_json["job"]["cron"] == "0 4 * * *"
    assert as_json["server"]["synced"] and as_json["server"]["matches_catalog"] is True
    assert len(as_json["server"]["next_runs"]) >= 5
    assert len(as_json["executions"]) == 10
    assert as_json["executions"][0]["scheduled_at"]["utc"] == "2026-11-12T04:00:00Z"
    assert as_json["record"]["completed"] == 12 and as_json["record"]["last_failure"] is None
    assert as_json["database_error"] is None


async def test_without_the_database_the_server_side_is_still_shown_and_exit_is_1(
    settings, tmp_path, synced
):
    catalog = write_catalog(tmp_path, **{"op-no-db": {"cron": "0 5 * * *", "timezone": "UTC"}})
    await synced(catalog, "op-no-db")
    down = {"DATABASE_URL": "postgresql://ops:topsecret@127.0.0.1:1/jobs"}

    listed = run_cli(settings, catalog, "list", **down)
    assert listed.returncode == 1
    row = next(line for line in listed.stdout.splitlines() if line.startswith("op-no-db"))
    assert "T05:00:00Z" in row and "?" in row
    assert "PostgreSQL is unavailable" in listed.stderr

    described = run_cli(settings, catalog, "describe", "op-no-db", **down)
    assert described.returncode == 1
    assert "  paused        no" in described.stdout
    assert "unavailable: PostgreSQL is unavailable" in described.stdout
    for output in (listed.stdout, listed.stderr, described.stdout, described.stderr):
        assert "topsecret" not in output and "Traceback" not in output


def test_next_shows_local_and_utc_times_and_flags_dst(settings, tmp_path):
    catalog = write_catalog(
        tmp_path,
        **{
            "op-spring": {"cron": "30 2 * * *", "timezone": "America/New_York"},
            "op-fall": {"cron": "30 1 * * *", "timezone": "America/New_York"},
        },
    )
    spring = run_cli(settings, catalog, "next", "op-spring", "--from", "2027-03-13", "-n", "3")
    assert spring.returncode == 0, spring.stderr
    assert "2027-03-13 02:30 EST  2027-03-13T07:30:00Z" in spring.stdout
    assert (
        "2027-03-14 03:00 EDT  2027-03-14T07:00:00Z  "
        "spring forward: 02:30 does not exist, runs at 03:00" in spring.stdout
    )
    assert "2027-03-15 02:30 EDT  2027-03-15T06:30:00Z" in spring.stdout

    fall = run_cli(
        settings, catalog, "next", "op-fall", "--from", "2027-11-06", "-n", "3", "--json"
    )
    assert fall.returncode == 0, fall.stderr
    runs = json.loads(fall.stdout)["runs"]
    assert [run["utc"] for run in runs] == [
        "2027-11-06T05:30:00Z",
        "2027-11-07T05:30:00Z",  # the first 01:30 only
        "2027-11-08T06:30:00Z",
    ]
    assert [run["note"] for run in runs] == [
        None,
        "fall back: runs once, at the first 01:30 (EDT)",
        None,
    ]


async def test_trigger_starts_one_run_that_is_recorded(
    settings, db, tmp_path, synced, start_workers
):
    catalog = write_catalog(
        tmp_path, **{"op-trigger": {"cron": "0 3 * * *", "timezone": "UTC", **QUIET}}
    )
    await synced(catalog, "op-trigger")
    start_workers(1)

    done = run_cli(settings, catalog, "trigger", "op-trigger")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("started op-trigger-")
    workflow_id = done.stdout.split()[1]

    async def recorded():
        rows = executions(db, "op-trigger")
        assert [row["status"] for row in rows] == ["completed"]
        return rows[0]

    row = await assert_eventually(recorded, timeout=60)
    assert row["workflow_id"] == workflow_id
    assert workflow_id == f"op-trigger-{row['scheduled_at'].astimezone(UTC):%Y-%m-%dT%H:%M:%S}Z"


async def test_a_second_trigger_in_the_same_second_is_reported_not_lost(client, tmp_path, synced):
    catalog = write_catalog(
        tmp_path, **{"op-twice": {"cron": "0 3 * * *", "timezone": "UTC", **QUIET}}
    )
    await synced(catalog, "op-twice")
    # No worker: the first run stays running, so Temporal drops a second start of its id.
    second = datetime.now(UTC).replace(microsecond=0)
    first = await trigger(client, "op-twice", second.replace(microsecond=100_000), timeout=20)
    assert first.action.workflow_id == f"op-twice-{second:%Y-%m-%dT%H:%M:%S}Z"

    with pytest.raises(OperationError) as err:
        await trigger(client, "op-twice", second.replace(microsecond=600_000), timeout=3)
    message = str(err.value)
    assert "did not start a run within 3s" in message
    assert f"run {first.action.workflow_id} of the same second already exists" in message
    actions = (await client.get_schedule_handle("op-twice").describe()).info.recent_actions
    assert [a.action.workflow_id for a in actions] == [first.action.workflow_id]
    # Runs started with ALLOW_ALL are not among the schedule's running actions: stop it here.
    await client.get_workflow_handle(first.action.workflow_id).terminate("test done")


async def test_backfill_counts_refuses_past_the_maximum_and_runs_with_yes(
    settings, db, tmp_path, synced, start_workers
):
    catalog = write_catalog(
        tmp_path, **{"op-backfill": {"cron": "0 3 * * *", "timezone": "UTC", **QUIET}}
    )
    await synced(catalog, "op-backfill")
    args = ("backfill", "op-backfill", "--start", "2026-10-01", "--end", "2026-10-06")

    refused = run_cli(settings, catalog, *args, BACKFILL_MAX_RUNS="3")
    assert refused.returncode == 2
    assert "would start 5 runs, more than the maximum of 3: pass --yes" in refused.stderr
    assert executions(db, "op-backfill") == []

    start_workers(1)
    done = run_cli(settings, catalog, *args, "--yes", BACKFILL_MAX_RUNS="3")
    assert done.returncode == 0, done.stderr
    assert "backfill of op-backfill: 5 run(s)" in done.stdout
    assert "overlap BUFFER_ALL" in done.stdout

    october = [datetime(2026, 10, day, 3, tzinfo=UTC) for day in range(1, 6)]
    await runs_completed(db, "op-backfill", october)


async def test_backfill_across_a_dst_change_runs_the_jobs_own_fire_times(
    settings, db, tmp_path, synced, start_workers
):
    catalog = write_catalog(
        tmp_path,
        **{"op-backfill-dst": {"cron": "30 2 * * *", "timezone": "America/New_York", **QUIET}},
    )
    await synced(catalog, "op-backfill-dst")
    start_workers(1)
    args = ("backfill", "op-backfill-dst", "--start", "2025-03-08", "--end", "2025-03-11")
    done = run_cli(settings, catalog, *args)
    assert done.returncode == 0, done.stderr
    assert "3 run(s)" in done.stdout

    across = [
        datetime(2025, 3, 8, 7, 30, tzinfo=UTC),  # 02:30 EST
        datetime(2025, 3, 9, 7, 0, tzinfo=UTC),  # 02:30 does not exist: 03:00 EDT
        datetime(2025, 3, 10, 6, 30, tzinfo=UTC),  # 02:30 EDT
    ]
    await runs_completed(db, "op-backfill-dst", across)


async def test_pause_needs_a_note_and_resume_lifts_it(client, settings, tmp_path, synced):
    catalog = write_catalog(tmp_path, **{"op-pause": {"cron": "0 6 * * *", "timezone": "UTC"}})
    await synced(catalog, "op-pause")
    handle = client.get_schedule_handle("op-pause")

    no_note = run_cli(settings, catalog, "pause", "op-pause")
    assert no_note.returncode == 2 and "--note" in no_note.stderr
    assert not (await handle.describe()).schedule.state.paused

    paused = run_cli(
        settings, catalog, "pause", "op-pause", "--note", "ledger migration", "--by", "bob"
    )
    assert paused.returncode == 0, paused.stderr
    state = (await handle.describe()).schedule.state
    assert (state.paused, state.note) == (True, "ledger migration")
    # `next` says it is paused, by whom and why, above the times it fires once resumed.
    upcoming = run_cli(settings, catalog, "next", "op-pause", "-n", "1")
    assert upcoming.returncode == 0, upcoming.stderr
    said = upcoming.stdout.splitlines()[1]
    assert said.startswith("  paused by bob with `schedules pause` at "), upcoming.stdout
    assert said.endswith(" (ledger migration): it runs none of these until resumed; they are "
                         "the times it fires once resumed"), said  # fmt: skip
    as_json = json.loads(run_cli(settings, catalog, "next", "op-pause", "--json").stdout)
    assert (as_json["paused"], as_json["note"]) == (True, "ledger migration")

    resumed = run_cli(settings, catalog, "resume", "op-pause")
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed op-pause (it was paused: ledger migration)" in resumed.stdout
    assert not (await handle.describe()).schedule.state.paused
    assert "paused" not in run_cli(settings, catalog, "next", "op-pause").stdout

    again = run_cli(settings, catalog, "resume", "op-pause")
    assert again.returncode == 0 and "is not paused; nothing changed" in again.stdout


@pytest.mark.parametrize(
    "command",
    [
        ["describe"],
        ["next"],
        ["trigger"],
        ["backfill", "--start", "2026-01-01", "--end", "2026-01-02"],
        ["pause", "--note", "x"],
        ["resume"],
    ],
)
def test_an_unknown_job_id_exits_2_naming_it(settings, tmp_path, command):
    catalog = write_catalog(tmp_path, **{"op-known": {"cron": "0 1 * * *", "timezone": "UTC"}})
    done = run_cli(settings, catalog, command[0], "no-such-job", *command[1:])
    assert done.returncode == 2
    assert done.stderr.strip() == "error: unknown job 'no-such-job'; the catalog has: op-known"


def test_a_job_without_a_schedule_cannot_be_triggered(settings, tmp_path):
    catalog = write_catalog(tmp_path, **{"op-unsynced": {"cron": "0 1 * * *", "timezone": "UTC"}})
    done = run_cli(settings, catalog, "trigger", "op-unsynced")
    assert done.returncode == 1
    assert "has no schedule on Temporal yet: run `python -m schedules sync`" in done.stderr


def test_list_with_temporal_unreachable_exits_1_with_one_line(settings, tmp_path):
    catalog = write_catalog(tmp_path, **{"op-any": {"cron": "0 1 * * *", "timezone": "UTC"}})
    done = schedules_cli(settings, "list", catalog=catalog, TEMPORAL_ADDRESS="127.0.0.1:1")
    assert done.returncode == 1
    assert done.stderr.startswith("error: cannot reach Temporal at 127.0.0.1:1")
    assert len(done.stderr.strip().splitlines()) == 1


def test_help_of_every_operator_command_names_its_exit_codes():
    for command in ("list", "describe", "next", "trigger", "backfill", "pause", "resume"):
        done = subprocess.run(
            [sys.executable, "-m", "schedules", command, "--help"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0 and "exit codes: 0" in done.stdout, command
