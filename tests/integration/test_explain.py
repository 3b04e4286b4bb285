"""`python -m schedules explain`, one test per reason it gives, on real servers.

Every verdict comes from what really happened: a backfilled night that ran or was skipped,
a run that failed, a schedule whose run waits for a worker that does not exist, a paused
schedule, an unreachable Temporal, a billing run held at its payment provider.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from temporalio.client import ScheduleBackfill, ScheduleOverlapPolicy

from devstack import free_port
from devstack.payments import PaymentProviderServer
from schedules.catalog.model import load_catalog
from schedules.catalog.times import local_text
from schedules.sync.apply import sync
from tests.helpers import assert_eventually
from tests.helpers.worker import schedules_cli, schedules_said
from tests.integration.jobs import executions, wait_until

LONDON = ZoneInfo("Europe/London")


def write_catalog(tmp_path: Path, **jobs: dict) -> Path:
    path = tmp_path / "jobs.toml"
    text = ""
    for job_id, fields in jobs.items():
        fields = {"kind": "invoice-reminders", "timezone": "UTC"} | fields
        text += f"[{job_id}]\n"
        text += "".join(
            f"{name} = {json.dumps(value) if not isinstance(value, dict) else _inline(value)}\n"
            for name, value in fields.items()
        )
    path.write_text(text)
    return path


def _inline(table: dict) -> str:
    return "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in table.items()) + " }"


def explain(settings, catalog: Path, job: str, *args: str, **env: str) -> tuple[int, str]:
    return schedules_said(settings, "explain", job, *args, catalog=catalog, **env)


@pytest.fixture
async def synced(client, task_queue):
    created: list[str] = []

    async def put(catalog: Path) -> list:
        jobs = list(load_catalog(catalog, engine=False))
        await sync(client, jobs, task_queue, prune=False)
        created.extend(job.id for job in jobs)
        return jobs

    yield put
    for job_id in created:
        await client.get_schedule_handle(job_id).delete()


def night(days_ago: int) -> datetime:
    day = datetime.now(LONDON).date() - timedelta(days=days_ago)
    return datetime.combine(day, datetime.min.time(), LONDON).replace(hour=2, minute=30)


async def backfill(client, job_id: str, slot: datetime) -> None:
    await client.get_schedule_handle(job_id).backfill(
        ScheduleBackfill(
            start_at=slot - timedelta(seconds=1),
            end_at=slot + timedelta(seconds=1),
            overlap=ScheduleOverlapPolicy.ALLOW_ALL,
        )
    )


def statuses(db, job: str) -> list[str]:
    return [row["status"] for row in executions(db, job)]


def utc(instant: datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def test_a_night_that_ran_one_skipped_by_its_deadline_and_times_that_are_not_due(
    client, db, settings, synced, start_workers, tmp_path
):
    nightly = {"cron": "30 2 * * *", "timezone": "Europe/London", "paused": True}
    catalog = write_catalog(
        tmp_path,
        nightly=nightly,
        strict=nightly | {"starting_deadline": "1m"},
        fallback={"cron": "30 1 * * *", "timezone": "America/New_York", "paused": True},
    )
    await synced(catalog)
    start_workers(1)
    slot = night(3)
    for job in ("nightly", "strict"):
        await backfill(client, job, slot)

    async def both_settled():
        assert statuses(db, "nightly") == ["completed"]
        assert statuses(db, "strict") == ["skipped"]

    await assert_eventually(both_settled, timeout=60)

    code, out = explain(settings, catalog, "nightly", "--at", utc(slot))
    assert code == 0 and "ran: completed" in out and "attempt 1" in out, out
    code, out = explain(settings, catalog, "strict", "--at", utc(slot))
    assert code == 1 and "skipped: missed starting deadline" in out, out
    # A night before the schedule existed: before its timing took effect.
    code, out = explain(settings, catalog, "nightly", "--at", utc(night(10)))
    assert code == 1 and "before the job's current timing took effect" in out, out
    # Not a fire time; the repeated 01:30 of a fall-back night; a night still to come.
    code, out = explain(settings, catalog, "nightly", "--at", utc(slot + timedelta(minutes=1)))
    assert code == 1 and "is not a fire time" in out, out
    code, out = explain(settings, catalog, "fallback", "--at", "2027-11-07T06:30:00Z")
    assert code == 1 and "runs once, at the first occurrence, 2027-11-07 01:30 EDT" in out, out
    code, out = explain(settings, catalog, "nightly", "--at", utc(night(-2)))
    assert code == 1 and "not due yet" in out, out
    code, out = explain(settings, catalog, "no-such-job")
    assert code == 2 and "unknown job 'no-such-job'" in out, out

    # `runs` lists the same record: the completed night, its origin and its counts.
    done = schedules_cli(settings, "runs", "nightly", catalog=catalog)
    assert done.returncode == 0, done.stderr
    header, line = done.stdout.splitlines()
    assert header.split()[:4] == ["SCHEDULED", "UTC", "ORIGIN", "STATUS"]
    assert utc(slot) in line and "completed" in line and "reminded 0" in line, line
    # The slot as every command shows a time: local with its zone's abbreviation, then UTC.
    assert line.startswith(f"{local_text(slot, 'Europe/London')}  {utc(slot)}  "), line
    done = schedules_cli(settings, "runs", "strict", "--json", catalog=catalog)
    (run,) = json.loads(done.stdout)["executions"]
    assert run["status"] == "skipped" and run["error"].startswith("missed starting deadline")


async def test_a_run_that_failed_after_its_attempts(
    client, db, settings, synced, start_workers, tmp_path
):
    catalog = write_catalog(
        tmp_path,
        brittle={
            "cron": "30 2 * * *",
            "timezone": "Europe/London",
            "paused": True,
            "retry": {
                "maximum_attempts": 2,
                "initial_interval": "0.2s",
                "maximum_interval": "0.2s",
            },
        },
    )
    await synced(catalog)
    db.execute("DROP TABLE invoices CASCADE")  # every attempt fails: the table is gone
    start_workers(1)
    slot = night(2)
    await backfill(client, "brittle", slot)

    async def failed():
        assert statuses(db, "brittle") == ["failed"]

    await assert_eventually(failed, timeout=60)
    code, out = explain(settings, catalog, "brittle", "--at", utc(slot))
    assert code == 1 and "failed after 2 attempt(s)" in out and "invoices" in out, out


async def test_a_run_no_worker_picks_up_a_time_skipped_for_it_and_a_paused_schedule(
    client, db, settings, synced, tmp_path, task_queue
):
    catalog = write_catalog(tmp_path, every5={"interval": "5s", "catchup": "latest"})
    await synced(catalog)
    handle = client.get_schedule_handle("every5")

    # No worker polls this test's queue: the first run Temporal starts waits ...
    async def started():
        info = (await handle.describe()).info
        assert info.recent_actions
        return info.recent_actions[0].scheduled_at

    first = await assert_eventually(started, timeout=30)
    code, out = explain(settings, catalog, "every5", "--at", utc(first))
    assert code == 1 and f"no worker polls task queue {task_queue!r}" in out, out

    # ... and the next fire time is skipped by Temporal (overlap skip): nothing started it.
    async def skipped_one():
        assert (await handle.describe()).info.num_actions_skipped_overlap >= 1

    await assert_eventually(skipped_one, timeout=30)
    code, out = explain(settings, catalog, "every5", "--at", utc(first + timedelta(seconds=5)))
    assert code == 1 and "Temporal never started it" in out, out

    # Paused: a fire time after the pause starts nothing; explain says who paused it, why.
    paused_at = datetime.now(UTC)
    pause = ("pause", "every5", "--note", "maintenance 42", "--by", "alice")
    done = schedules_cli(settings, *pause, catalog=catalog)
    assert done.returncode == 0, done.stderr
    after = datetime.fromtimestamp((paused_at.timestamp() // 5 + 2) * 5, UTC)
    wait_until(after)
    code, out = explain(settings, catalog, "every5", "--at", utc(after))
    assert code == 1 and "the schedule is paused by alice with `schedules pause` at " in out
    assert "(maintenance 42): a paused schedule starts nothing" in out, out
    async for run in client.list_workflows(
        f"WorkflowId STARTS_WITH 'every5-' AND TaskQueue = '{task_queue}'"
    ):
        await client.get_workflow_handle(run.id, run_id=run.run_id).terminate("test over")


async def test_a_time_after_the_schedules_end(client, db, settings, synced, tmp_path):
    end = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    catalog = write_catalog(tmp_path, ending={"interval": "5s", "paused": True, "end_at": utc(end)})
    await synced(catalog)
    later = datetime.fromtimestamp((end.timestamp() // 5 + 1) * 5, UTC)
    wait_until(later)
    code, out = explain(settings, catalog, "ending", "--at", utc(later))
    assert code == 1 and "after the schedule's end_at" in out, out


async def test_it_says_it_cannot_tell_when_temporal_is_unreachable(settings, tmp_path):
    catalog = write_catalog(tmp_path, nightly={"cron": "30 2 * * *", "timezone": "Europe/London"})
    address = f"127.0.0.1:{free_port()}"
    code, out = explain(settings, catalog, "nightly", "--timeout", "3", TEMPORAL_ADDRESS=address)
    # It gives up at once on a refused connection (not a minute of retries), naming what
    # it tried.
    assert code == 2 and "cannot tell why" in out, out
    assert f"cannot reach Temporal at {address}: Connection refused" in out, out


async def test_a_billing_run_held_at_its_provider_is_still_running(
    client, db, settings, synced, start_workers, tmp_path
):
    provider = PaymentProviderServer(free_port())
    provider.start()
    provider.hold()
    try:
        db.execute(
            "INSERT INTO subscriptions (customer_email, plan, amount_cents, started_on, "
            "payment_method) VALUES ('a@example.com', 'team', 900, '2026-01-01', 'pm_a')"
        )
        catalog = write_catalog(
            tmp_path,
            billing={
                "kind": "monthly-billing",
                "cron": "0 3 1 * *",
                "timezone": "America/New_York",
                "paused": True,
            },
        )
        await synced(catalog)
        start_workers(1, PAYMENTS_URL=provider.url)
        slot = datetime(2026, 10, 1, 7, tzinfo=UTC)
        await backfill(client, "billing", slot)

        async def held():
            assert provider.arrived.is_set()

        await assert_eventually(held, timeout=60)
        code, out = explain(settings, catalog, "billing", "--at", utc(slot))
        assert code == 1 and "still running since" in out and "attempt" in out, out
    finally:
        provider.stop()
