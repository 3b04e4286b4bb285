"""`trigger --wait` and `backfill --wait` against the real dev server, PostgreSQL and workers:
each run's line agrees with its `job_executions` row, and the exit code with how they ended."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime

import pytest

from schedules.catalog.times import local_text
from tests.integration import test_operate
from tests.integration.jobs import executions, insert_invoices
from tests.integration.test_explain import write_catalog as write_catalog_with_tables
from tests.integration.test_operate import QUIET, insert_execution, run_cli, write_catalog

synced = test_operate.synced  # the fixture: sync a test's jobs, delete them afterwards

BRITTLE = {
    "maximum_attempts": 2,
    "initial_interval": "0.2s",
    "maximum_interval": "0.2s",
}


def slot_text(instant: datetime) -> str:
    """How a UTC job's slot is printed: `2026-10-01 03:00 UTC  2026-10-01T03:00:00Z`."""
    instant = instant.astimezone(UTC)
    clock = "%H:%M" if instant.second == 0 else "%H:%M:%S"
    return f"{instant:%Y-%m-%d {clock}} UTC  {instant:%Y-%m-%dT%H:%M:%S}Z"


async def test_trigger_wait_prints_the_finished_run_as_recorded(
    db, settings, tmp_path, synced, start_workers
):
    catalog = write_catalog(
        tmp_path, **{"wr-trigger": {"cron": "0 3 * * *", "timezone": "UTC", **QUIET}}
    )
    await synced(catalog, "wr-trigger")
    insert_invoices(db, 3, due=date(2020, 1, 1))
    start_workers(1)

    done = run_cli(settings, catalog, "trigger", "wr-trigger", "--wait")
    assert done.returncode == 0, done.stderr
    (row,) = executions(db, "wr-trigger")  # finished before the command returned
    assert row["status"] == "completed" and row["result"]["counts"]["reminded"] == 3
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"started {row['workflow_id']} ")
    run_line = next(line for line in lines if line.startswith(slot_text(row["scheduled_at"])))
    head, counts = run_line.split("  took ")[1].split("  ", 1)
    assert run_line.startswith(f"{slot_text(row['scheduled_at'])}  manual  completed  took ")
    assert re.fullmatch(r"(\d+[dhms])+", head), run_line
    assert dict(c.rsplit(" ", 1) for c in counts.split(", ")) == {
        name: str(value) for name, value in row["result"]["counts"].items()
    }
    assert lines[-1] == "1 run(s) of wr-trigger: 1 ran or had nothing to do"

    # `explain --at` the run's own time, to the second as its workflow id, `runs` and the
    # line above name it (its slot is the trigger's time to the microsecond), finds it.
    second = f"{row['scheduled_at'].astimezone(UTC):%Y-%m-%dT%H:%M:%S}Z"
    told = run_cli(settings, catalog, "explain", "wr-trigger", "--at", second)
    assert told.returncode == 0, told.stdout + told.stderr
    shown = f"{local_text(row['scheduled_at'], 'UTC')} ({second})"
    assert told.stdout.startswith(f"wr-trigger at {shown}: ran: completed "), told.stdout
    assert "manual run" in told.stdout, told.stdout


async def test_trigger_wait_of_a_failing_run_prints_its_error_and_exits_1(
    db, settings, tmp_path, synced, start_workers
):
    catalog = write_catalog_with_tables(
        tmp_path, **{"wr-brittle": {"cron": "0 3 * * *", **QUIET, "retry": BRITTLE}}
    )
    await synced(catalog, "wr-brittle")
    db.execute("DROP TABLE invoices CASCADE")  # every attempt fails: the table is gone
    start_workers(1)

    done = run_cli(settings, catalog, "trigger", "wr-brittle", "--wait")
    assert done.returncode == 1, done.stdout + done.stderr
    (row,) = executions(db, "wr-brittle")
    assert row["status"] == "failed"
    run_line = next(
        line for line in done.stdout.splitlines() if line.startswith(slot_text(row["scheduled_at"]))
    )
    assert "  manual  failed  took " in run_line
    assert "error: " in run_line and 'relation "invoices" does not exist' in run_line
    assert done.stdout.splitlines()[-1] == (
        "1 run(s) of wr-brittle: 0 ran or had nothing to do, 1 failed; "
        "see `python -m schedules runs wr-brittle`"
    )


async def test_backfill_wait_prints_each_run_and_tells_new_runs_from_old(
    db, settings, tmp_path, synced, start_workers
):
    catalog = write_catalog(
        tmp_path, **{"wr-backfill": {"cron": "0 3 * * *", "timezone": "UTC", **QUIET}}
    )
    await synced(catalog, "wr-backfill")
    slots = [datetime(2026, 10, day, 3, tzinfo=UTC) for day in (1, 2, 3)]
    insert_execution(db, "wr-backfill", slots[1])  # completed before: a no-op now
    start_workers(1)
    args = ("backfill", "wr-backfill", "--start", "2026-10-01", "--end", "2026-10-04", "--wait")

    done = run_cli(settings, catalog, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = executions(db, "wr-backfill")
    assert [(r["scheduled_at"], r["status"]) for r in rows] == [(s, "completed") for s in slots]
    runs = [line for line in done.stdout.splitlines() if line.startswith("2026-10-0")]
    assert [line.split("  took ")[0] for line in runs] == [
        f"{slot_text(slots[0])}  backfill  completed",
        f"{slot_text(slots[1])}  backfill  already completed",
        f"{slot_text(slots[2])}  backfill  completed",
    ]
    assert done.stdout.splitlines()[-1] == "3 run(s) of wr-backfill: 3 ran or had nothing to do"

    # Again: each slot's id now has a completed run; the new runs are waited for, not those.
    again = run_cli(settings, catalog, *args)
    assert again.returncode == 0, again.stdout + again.stderr
    runs = [line for line in again.stdout.splitlines() if line.startswith("2026-10-0")]
    assert [line.split("  took ")[0] for line in runs] == [
        f"{slot_text(slot)}  backfill  already completed" for slot in slots
    ]


async def test_a_wait_that_times_out_exits_3_and_leaves_the_runs_going(
    client, settings, tmp_path, synced
):
    catalog = write_catalog(
        tmp_path,
        **{
            "wr-late": {"cron": "0 3 * * *", "timezone": "UTC", **QUIET},
            "wr-late-backfill": {"cron": "0 3 * * *", "timezone": "UTC", **QUIET},
        },
    )
    await synced(catalog, "wr-late", "wr-late-backfill")
    # No worker polls the task queue: no run can finish, whatever the machine's load.
    done = run_cli(settings, catalog, "trigger", "wr-late", "--wait", "--timeout", "10")
    workflow_id = done.stdout.split()[1]
    try:
        assert done.returncode == 3, done.stdout + done.stderr
        assert "  manual  still running  took -" in done.stdout
        assert done.stdout.splitlines()[-1] == (
            "1 run(s) of wr-late: 0 ran or had nothing to do, 1 not finished within 10s "
            "(they go on); see `python -m schedules runs wr-late`"
        )
        described = await client.get_workflow_handle(workflow_id).describe()
        assert described.status is not None and described.status.name == "RUNNING"
    finally:
        await client.get_workflow_handle(workflow_id).terminate("test done")

    backfilled = run_cli(
        settings,
        catalog,
        *("backfill", "wr-late-backfill", "--start", "2026-10-01", "--end", "2026-10-03"),
        *("--wait", "--timeout", "3"),
    )
    assert backfilled.returncode == 3, backfilled.stdout + backfilled.stderr
    runs = [line for line in backfilled.stdout.splitlines() if line.startswith("2026-10-0")]
    assert len(runs) == 2
    assert all(" still running " in line or " not started " in line for line in runs), runs


@pytest.mark.parametrize(
    "args",
    [
        ("backfill", "wr-any", "--start", "2026-10-01", "--end", "2026-10-02", "--timeout", "5"),
        ("trigger", "wr-any", "--wait", "--timeout", "0"),
    ],
    ids=["backfill timeout without wait", "trigger wait timeout 0"],
)
def test_wait_options_it_cannot_use_are_refused(settings, tmp_path, args):
    catalog = write_catalog(tmp_path, **{"wr-any": {"cron": "0 3 * * *", "timezone": "UTC"}})
    done = run_cli(settings, catalog, *args)
    assert done.returncode == 2
    assert "--timeout" in done.stderr and len(done.stderr.strip().splitlines()) == 1
