"""Slot dependencies on real servers (docs/dependencies.md): a downstream slot waits for
exactly the upstream slots mapped onto it, on ordinary and DST nights in New York and
London; the policies at an upstream failure and at the deadline; an upstream backfill
releases waiting runs; and a worker of one activity slot and one workflow task slot runs
the upstream that releases its waiting downstreams (the wait holds no slot).

The upstream's history is partly written into the ledger by the test (completed or failed
rows: the ledger is what the engine trusts), and the slot that releases is run for real.
Each test ends with `schedules audit` clean, whose own check of dependencies
(`dependency_unmet`) judges that no work started before its upstream slots completed.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg.rows import dict_row
from temporalio.client import Client, ScheduleBackfill, ScheduleOverlapPolicy

from core.errors import InvalidScheduleError
from schedules import tenants
from schedules.catalog.dependencies import DependencySpec
from schedules.catalog.model import JobSpec, default_catalog
from schedules.health.check_run import run_check
from schedules.health.evidence import gather_evidence
from schedules.health.explain import explain
from schedules.health.status import Kind
from tests.dependency_windows import COUNTS, WINDOWS, H, hours, utc
from tests.helpers import ROOT, assert_eventually, run_python_walkthrough
from tests.helpers.audit import audited
from tests.helpers.worker import schedules_cli
from tests.integration.jobs import FAST_RETRY, registered_since
from tests.integration.runtime import audit_clean, dispatcher, fresh_ids, tick_all

SINCE = utc(2026, 1, 1)  # the upstreams have fired their timing since then
# The downstreams' since: their past slots are backfills. Their schedules stay paused, so
# it also ends every audit here: the hours after it are fire times no schedule runs.
NOW = datetime.now(UTC)


def _quiet(job: JobSpec, job_id: str, **update) -> JobSpec:
    return job.model_copy(
        update={"id": job_id, "retry": FAST_RETRY, "paused": True, "note": "test", **update}
    )


def upstream(job_id: str) -> JobSpec:
    """An hourly-sync job, hourly in UTC (no events: each run aggregates nothing)."""
    return _quiet(default_catalog()["hourly-sync"], job_id)


def downstream(job_id: str, up: str, zone: str = "UTC", cron: str = "0 2 * * *", **dep) -> JobSpec:
    """A nightly-reconcile job at `cron` in `zone`, waiting for `up` (a window, 2h, wait)."""
    spec = {"job": up, "slots": "window", "within": timedelta(hours=2)} | dep
    return _quiet(
        default_catalog()["nightly-reconcile"],
        job_id,
        cron=cron,
        timezone=zone,
        depends_on=[DependencySpec(**spec)],
    )


def ids(*names: str) -> list[str]:
    tag = uuid.uuid4().hex[:6]
    return [f"dep-{name}-{tag}" for name in names]


async def backfill(client: Client, job_id: str, slots: list[datetime]) -> None:
    """Run each of `slots` of the job again, in one request (several requests to one
    schedule in the same second can lose one)."""
    second = timedelta(seconds=1)
    await client.get_schedule_handle(job_id).backfill(
        *(
            ScheduleBackfill(
                start_at=slot - second,
                end_at=slot + second,
                overlap=ScheduleOverlapPolicy.ALLOW_ALL,
            )
            for slot in slots
        )
    )


def record(db: psycopg.Connection, job_id: str, slots: list[datetime], status: str) -> None:
    """The upstream's history: a row per slot, as its runs would have left them."""
    db.execute(
        "INSERT INTO job_executions (job_name, scheduled_at, status, origin, started_at,"
        " finished_at, error)"
        " SELECT %s, t, %s, 'scheduled', t, t + interval '1 minute',"
        " CASE WHEN %s = 'failed' THEN 'the upstream failed' END"
        " FROM unnest(%s::timestamptz[]) t",
        (job_id, status, status, slots),
    )


def recent(db: psycopg.Connection, job_id: str) -> None:
    """A completed run of the upstream an hour ago: the test's older slots are backfills
    (a run of a slot newer than the last recorded one would catch up on the missed ones)."""
    record(db, job_id, [NOW.replace(minute=0, second=0, microsecond=0) - H], "completed")


def row(db: psycopg.Connection, job_id: str, slot: datetime) -> dict | None:
    return (
        db.cursor(row_factory=dict_row)
        .execute(
            "SELECT e.*, w.status AS wait, w.progress, w.reason AS wait_reason,"
            " (SELECT min(c.committed_at) FROM commit_journal c"
            "  WHERE c.execution_id = e.id AND c.what = 'take_over') AS work_started"
            " FROM job_executions e LEFT JOIN dependency_waits w ON w.execution_id = e.id"
            " WHERE e.job_name = %s AND e.scheduled_at = %s",
            (job_id, slot),
        )
        .fetchone()
    )


async def waiting(db: psycopg.Connection, job_id: str, slot: datetime, shows: str) -> dict:
    """Wait until the slot's run waits, showing `shows`."""

    async def check():
        found = row(db, job_id, slot)
        assert found is not None and found["wait"] == "waiting", (found or {}).get("error")
        assert shows in found["progress"], found["progress"]
        return found

    return await assert_eventually(check, timeout=60)


async def settled(db: psycopg.Connection, job_id: str, slot: datetime, status: str) -> dict:
    async def check():
        found = row(db, job_id, slot)
        assert found is not None and found["status"] == status, found
        return found

    return await assert_eventually(check, timeout=60)


async def test_a_night_waits_for_exactly_its_window_on_ordinary_and_dst_nights(
    client, db, database_url, task_queue, start_workers
):
    up_id, ny_id, london_id = ids("hourly", "ny", "london")
    up = upstream(up_id)
    nightly = {
        "America/New_York": downstream(ny_id, up_id, "America/New_York"),
        "Europe/London": downstream(london_id, up_id, "Europe/London"),
    }
    cases = sorted(WINDOWS)
    for case in cases:  # every mapped slot but the night's own hour has completed
        _, slot, previous = WINDOWS[case]
        record(db, up_id, hours(previous + H, slot - H), "completed")
    recent(db, up_id)
    start_workers(1)
    async with (
        registered_since(client, [up], task_queue, SINCE),
        registered_since(client, list(nightly.values()), task_queue, NOW),
    ):
        for zone, night in nightly.items():
            await backfill(client, night.id, [w[1] for w in WINDOWS.values() if w[0] == zone])
        for case in cases:  # each waits for its own hour alone: n - 1 of n done
            zone, slot, _ = WINDOWS[case]
            n = COUNTS[case]
            await waiting(db, nightly[zone].id, slot, f"{n - 1} of {n} done")
        # The upstream's own run of each night's hour releases that night.
        await backfill(client, up_id, [WINDOWS[case][1] for case in cases])
        for case in cases:
            zone, slot, _ = WINDOWS[case]
            night = await settled(db, nightly[zone].id, slot, "completed")
            released_by = row(db, up_id, slot)
            assert released_by["status"] == "completed" and released_by["origin"] == "backfill"
            assert night["wait"] == "ready" and night["work_started"] > released_by["finished_at"]
        nights = list(nightly.values())
        await audited(
            client, database_url, task_queue, nights, start=utc(2026, 3, 1), end=NOW, known=[up]
        )


X, Y = utc(2026, 11, 25, 10), utc(2026, 11, 25, 11)  # two upstream hours


async def test_policies_at_a_failed_upstream_and_at_the_deadline_and_a_backfill_releases(
    client, db, database_url, task_queue, start_workers
):
    """X's upstream slot failed: `wait` waits, `skip` skips, `run` runs anyway. Y's never
    ran: past a 2s deadline `skip` skips, `run` runs, `wait` waits on, overdue, and check
    alerts. A backfill of the upstream's X and Y then releases the two still waiting."""
    up_id, *names = ids("hourly", "wait", "skip", "run", "late-skip", "late-run", "late-wait")
    up = upstream(up_id)
    hourly = {"cron": "0 * * * *", "slots": "same"}
    policies = [("wait", "1h"), ("skip", "1h"), ("run", "1h")]
    policies += [("skip", "2s"), ("run", "2s"), ("wait", "2s")]
    downs = [
        downstream(name, up_id, on_failure=policy, within=within, **hourly)
        for name, (policy, within) in zip(names, policies, strict=True)
    ]
    at = {d.id: X if i < 3 else Y for i, d in enumerate(downs)}
    d_wait, d_skip, d_run, late_skip, late_run, late_wait = downs
    record(db, up_id, [X], "failed")
    recent(db, up_id)
    start_workers(1)
    async with (
        registered_since(client, [up], task_queue, SINCE),
        registered_since(client, downs, task_queue, NOW),
    ):
        for d in downs:
            await backfill(client, d.id, [at[d.id]])
        skipped = await settled(db, d_skip.id, X, "skipped")
        assert skipped["wait"] == "skipped" and skipped["work_started"] is None
        assert skipped["error"].startswith(f"upstream {up_id}: 1 slot(s) settled without")
        assert "failed (the upstream failed)" in skipped["error"]
        ran = await settled(db, d_run.id, X, "completed")
        assert ran["wait"] == "run_anyway" and ran["wait_reason"].startswith("run anyway")
        late = await settled(db, late_skip.id, Y, "skipped")
        assert "1 of 1 slot(s) not completed within 2s" in late["error"]
        assert (await settled(db, late_run.id, Y, "completed"))["wait"] == "run_anyway"
        await waiting(db, d_wait.id, X, "0 of 1 done, 1 settled without completing")
        overdue = await waiting(db, late_wait.id, Y, "past its deadline")

        report = await run_check(client, database_url, [d_wait, late_wait], datetime.now(UTC))
        alerts = [a for a in report.alerts if a.kind == Kind.DEPENDENCY_OVERDUE]
        assert [a.job for a in alerts] == [late_wait.id]  # d_wait is within its hour
        assert overdue["progress"] in alerts[0].message
        told = await gather_evidence(
            client, database_url, late_wait, Y, datetime.now(UTC), task_queue=task_queue
        )
        waits = explain(told)
        assert waits.reason == "waiting_for_upstream"
        # Its upstream's schedule is paused: said with by whom and why.
        assert waits.details[0].startswith(
            f"its upstream {up_id} is paused by the catalog's `paused = true` ("
        ), waits.details
        assert waits.details[0].endswith("): its slots do not run until it is resumed")

        await backfill(client, up_id, [X, Y])  # X failed: run again; Y: run at last
        for d in (d_wait, late_wait):
            night = await settled(db, d.id, at[d.id], "completed")
            released_by = row(db, up_id, at[d.id])
            assert night["wait"] == "ready" and night["work_started"] > released_by["finished_at"]
        await audited(client, database_url, task_queue, downs, start=X, end=NOW, known=[up])


async def test_waiting_runs_hold_no_slot_of_a_worker_of_one(
    client, db, database_url, task_queue, start_workers
):
    """Three runs wait on one worker of one activity slot, one workflow task slot and one
    local activity slot: the upstream still runs on it and releases all three."""
    up_id, *names = ids("hourly", "a", "b", "c")
    up = upstream(up_id)
    downs = [downstream(name, up_id, cron="0 * * * *", slots="same") for name in names]
    recent(db, up_id)
    one = {
        f"WORKER_MAX_CONCURRENT_{what}": "1"
        for what in ("ACTIVITIES", "WORKFLOW_TASKS", "LOCAL_ACTIVITIES")
    }
    one["WORKER_MAX_CACHED_WORKFLOWS"] = "0"  # no sticky queue: its one poller is not split
    start_workers(1, **one)
    async with (
        registered_since(client, [up], task_queue, SINCE),
        registered_since(client, downs, task_queue, NOW),
    ):
        for d in downs:
            await backfill(client, d.id, [X])
        for d in downs:
            await waiting(db, d.id, X, "0 of 1 done")
        await backfill(client, up_id, [X])
        for d in downs:
            assert (await settled(db, d.id, X, "completed"))["wait"] == "ready"
        await audited(client, database_url, task_queue, downs, start=X, end=NOW, known=[up])


async def test_runtime_schedules_wait_for_the_tenants_schedule_and_for_a_catalog_job(
    client, db, database_url, task_queue, start_workers
):
    """A runtime schedule waits for another of its tenant's (by name) and one for a catalog
    job; each is released by its upstream's backfilled run. Refused at the edge: an
    unknown upstream, a cycle, and deleting a schedule another depends on."""
    fresh_ids(db)
    tenant = f"dep-{uuid.uuid4().hex[:6]}"
    noop = {"tenant": tenant, "kind": "test-noop", "cron": "0 * * * *", "timezone": "UTC"}
    noop |= {"paused": True, "note": "test: backfilled runs only"}
    wait = {"slots": "same", "within": "1h"}
    since = lambda: SINCE  # noqa: E731 - the schedules' timing holds since then
    up = (await tenants.create(database_url, noop | {"name": "up"}, clock=since)).schedule
    down = await tenants.create(
        database_url,
        noop | {"name": "down", "depends_on": [{"schedule": "up", **wait}]},
        clock=since,
    )
    by_job = await tenants.create(
        database_url,
        noop | {"name": "by-job", "depends_on": [{"job": "hourly-sync", **wait}]},
        clock=since,
    )
    with pytest.raises(InvalidScheduleError, match=r"depends_on\[0\].schedule: the tenant has"):
        await tenants.create(
            database_url, noop | {"name": "x", "depends_on": [{"schedule": "nope", **wait}]}
        )
    with pytest.raises(InvalidScheduleError, match="a cycle: up -> down -> up"):
        changes = {"depends_on": [{"schedule": "down", **wait}]}
        await tenants.update(database_url, up.id, up.version, changes)
    with pytest.raises(InvalidScheduleError, match="cannot be deleted: 'down' depend"):
        await tenants.delete(database_url, up.id)

    catalog_up = upstream("hourly-sync")
    recent(db, catalog_up.id)
    start_workers(1)
    async with registered_since(client, [catalog_up], task_queue, SINCE):
        async with dispatcher(database_url, client, task_queue) as d:
            for waiter in (down.schedule, by_job.schedule):
                await tenants.backfill(database_url, waiter.id, X, X + H)
            await tick_all(d, datetime.now(UTC))
            await waiting(db, down.schedule.ledger_name, X, "waiting for schedule 'up'")
            told = await tenants.explain(database_url, down.schedule.id, X)
            assert told.verdict.startswith("running, waiting for schedule 'up'"), told.verdict
            assert told.verdict.endswith(
                f"; its upstream schedule 'up' ({up.ledger_name}) is paused by an unrecorded "
                "writer (test: backfilled runs only): its slots do not run until it is resumed"
            ), told.verdict
            await waiting(db, by_job.schedule.ledger_name, X, "waiting for hourly-sync")
            await tenants.backfill(database_url, up.id, X, X + H)
            await tick_all(d, datetime.now(UTC))
            await backfill(client, catalog_up.id, [X])
        for waiter in (down.schedule, by_job.schedule):
            assert (await settled(db, waiter.ledger_name, X, "completed"))["wait"] == "ready"
        await audit_clean(database_url, client, task_queue, X, X + H, catalog=[catalog_up])


def test_the_python_example_of_the_docs_runs_as_written(database_url):
    """docs/dependencies.md's Python example (its shell block is a runnable one:
    tests/integration/test_docs_runnable.py)."""
    shown, cycle, orphan = run_python_walkthrough(ROOT / "docs" / "dependencies.md", database_url)
    assert shown == "report [\"schedule 'export'\", 'hourly-sync']"
    assert cycle == (
        "schedule 'acme'/'export': depends_on: a cycle: export -> report -> export; a job "
        "cannot wait, through others, for itself"
    )
    assert orphan.startswith("schedule 'acme'/'export': cannot be deleted: 'report' depend")


def test_the_command_line_refuses_a_bad_dependency_in_one_line_and_writes_nothing(
    settings, db, tmp_path
):
    create = ("tenants", "create", "--tenant", "acme", "--name", "x", "--kind", "test-noop")
    create += ("--cron", "0 2 * * *", "--timezone", "UTC", "--depends-on")
    done = schedules_cli(settings, *create, '[{"job": "nope", "slots": "window", "within": "2h"}]')
    assert done.returncode == 2 and "depends_on[0].job: no catalog job 'nope'" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    lines = [
        {"tenant": "acme", "name": a, "kind": "test-noop", "cron": "0 * * * *",
         "timezone": "UTC", "depends_on": [{"schedule": b, "slots": "same", "within": "1h"}]}
        for a, b in (("a", "b"), ("b", "a"))
    ]  # fmt: skip
    path = tmp_path / "cycle.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    done = schedules_cli(settings, "tenants", "import", str(path))
    assert done.returncode == 2 and "a cycle: a -> b -> a" in done.stderr, done.stderr
    assert db.execute("SELECT count(*) FROM runtime_schedules").fetchone() == (0,)
