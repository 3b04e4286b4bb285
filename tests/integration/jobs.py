"""Helpers for integration tests: invoices, schedules and execution rows."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta

import psycopg
from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.enums.v1 import ScheduleOverlapPolicy
from temporalio.api.schedule.v1 import SchedulePatch, TriggerImmediatelyRequest
from temporalio.api.workflowservice.v1 import PatchScheduleRequest
from temporalio.client import Client, ScheduleBackfill, ScheduleSpec
from temporalio.client import ScheduleOverlapPolicy as Overlap
from temporalio.service import RPCError, RPCStatusCode

from schedules.catalog.compile import MANAGED_MEMO_KEY, MANAGED_MEMO_VALUE, compile_schedule
from schedules.catalog.model import JobSpec, RetrySpec, default_catalog
from schedules.sync.apply import sync
from schedules.sync.plan import managed_schedule_ids
from tests.helpers import assert_eventually
from workflows import ScheduledJobWorkflow

FAST_RETRY = RetrySpec(
    initial_interval=timedelta(seconds=0.5), maximum_interval=timedelta(seconds=2)
)


def takeover_retry(attempts: int) -> RetrySpec:
    """Retries for a test whose attempts are cut off and taken over: at most `attempts`,
    each soon after the last."""
    return RetrySpec(
        maximum_attempts=attempts,
        initial_interval=timedelta(seconds=0.5),
        maximum_interval=timedelta(seconds=1),
    )


def paused_catalog_job(
    job_id: str, note: str = "test: backfilled and triggered runs only", **params
) -> JobSpec:
    """The catalog's `job_id` job, with test-sized retries and `params` over its own.

    Paused (`note` says so): its cron must add no run of its own to a test's backfilled or
    triggered ones (both still run on a paused schedule).
    """
    job = default_catalog()[job_id]
    return job.model_copy(
        update={"params": job.params | params, "retry": FAST_RETRY, "paused": True, "note": note}
    )


def invoice_job(heartbeat: timedelta | None = None, **params) -> JobSpec:
    """The catalog's invoice-reminders job, `paused_catalog_job`. Its heartbeat timeout stays
    the catalog's unless given: a short one times out a busy machine's healthy attempts."""
    job = paused_catalog_job("invoice-reminders", **params)
    return job.model_copy(update={"heartbeat": heartbeat or job.heartbeat})


@contextlib.asynccontextmanager
async def registered(
    client: Client, job: JobSpec, task_queue: str, now: datetime | None = None
) -> AsyncIterator[None]:
    """Register `job`'s schedule for the test and delete it afterwards.

    `now` is the sync's clock (default: the wall clock): it places the horizon of a
    UTC-compiled spec, which fires nothing before 1 January of its clock's year (in the
    job's zone), so a test backfilling fixed past dates syncs as of them.
    """
    await sync(client, [job], task_queue, prune=False, now=now)  # never anyone else's
    try:
        yield
    finally:
        await client.get_schedule_handle(job.id).delete()


@contextlib.asynccontextmanager
async def registered_since(
    client: Client, jobs: list[JobSpec], task_queue: str, since: datetime
) -> AsyncIterator[None]:
    """Register `jobs`' schedules as if sync had applied their timings at `since` (sync
    stamps the server's time of its write: a test of past days gives an older one, so the
    days are under the jobs' timing), paused; delete them afterwards."""
    try:
        for job in jobs:
            schedule = compile_schedule(job, task_queue, since, now=since)
            schedule.state.paused = True
            await client.create_schedule(
                job.id, schedule, memo={MANAGED_MEMO_KEY: MANAGED_MEMO_VALUE}
            )
        yield
    finally:
        for job in jobs:
            with contextlib.suppress(RPCError):
                await client.get_schedule_handle(job.id).delete()


def insert_invoices(db: psycopg.Connection, count: int, due: date, start: int = 1) -> None:
    """Insert `count` unpaid invoices due on `due`, numbered from `start`, in one statement."""
    db.execute(
        """
        INSERT INTO invoices (invoice_number, customer_email, status, due_date)
        SELECT 'INV-' || lpad(n::text, 8, '0'), 'customer' || (n %% 500) || '@example.com',
               'Unpaid', %s
        FROM generate_series(%s::bigint, %s::bigint) AS n
        """,
        (due, start, start + count - 1),
    )


def executions(db: psycopg.Connection, job: str) -> list[dict]:
    cur = db.cursor(row_factory=psycopg.rows.dict_row)
    return cur.execute(
        "SELECT * FROM job_executions WHERE job_name = %s ORDER BY scheduled_at", (job,)
    ).fetchall()


async def runs_completed(
    db: psycopg.Connection, job_id: str, slots: list[datetime], timeout: float = 90
) -> list[dict]:
    """Wait until `job_id`'s rows are those of `slots`, in order, each completed; the rows."""

    async def done():
        rows = executions(db, job_id)
        assert [(r["scheduled_at"], r["status"]) for r in rows] == [
            (slot, "completed") for slot in slots
        ], rows
        return rows

    return await assert_eventually(done, timeout=timeout)


def waiting_on(db: psycopg.Connection, table: str) -> list[int]:
    """PostgreSQL backends waiting for a lock on a statement that names `table` (pids)."""
    rows = db.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock' AND query LIKE %s",
        (f"%{table}%",),
    ).fetchall()
    return [pid for (pid,) in rows]


def outbox_count(db: psycopg.Connection) -> int:
    return db.execute("SELECT count(*) FROM outbox_messages").fetchone()[0]


def daily_slots(first: datetime, n: int) -> list[datetime]:
    return [first + timedelta(days=i) for i in range(n)]


def grid_after(instant: datetime, every: timedelta) -> datetime:
    """The first multiple of `every` since the epoch after `instant` (an interval's grid)."""
    seconds = every.total_seconds()
    return datetime.fromtimestamp((instant.timestamp() // seconds + 1) * seconds, UTC)


def wait_until(instant: datetime) -> None:
    """Let wall-clock time pass `instant` (a fire time must go by, or a run be late)."""
    while datetime.now(UTC) <= instant:
        time.sleep(0.05)


async def fire_once(
    client: Client, job: JobSpec, task_queue: str, every: timedelta = timedelta(seconds=4)
) -> tuple[JobSpec, datetime]:
    """Register `job` to fire exactly once (`fire_n`); the job as registered and its fire
    time."""
    bounded, (fire,) = await fire_n(client, job, task_queue, 1, every)
    return bounded, fire


async def fire_n(
    client: Client, job: JobSpec, task_queue: str, n: int, every: timedelta = timedelta(seconds=4)
) -> tuple[JobSpec, list[datetime]]:
    """Register `job` to fire exactly `n` times, `every` apart, from a time the server
    confirms it will fire.

    The job becomes an every-`every` interval job bounded by start_at and end_at around its
    `n` fire times. A sync slower than the time left to it leaves a schedule that never
    fires (the server fires nothing from before it applied the timing); then the next fire
    time is tried, twice as far ahead. Returns the job as registered and its fire times.
    """
    lead = timedelta(seconds=2)
    while True:
        fire = grid_after(datetime.now(UTC) + lead, every)
        bounded = job.model_copy(
            update={
                "cron": None,
                "interval": every,
                # An interval runs on elapsed time: no business calendar (card-settlement's).
                "calendar": None,
                "on_holiday": None,
                "calendar_definition": None,
                "start_at": fire - timedelta(seconds=1),
                "end_at": fire + every * (n - 1) + timedelta(seconds=1),
                "paused": False,
                "note": "",
            }
        )
        await sync(client, [bounded], task_queue, prune=False)
        info = (await client.get_schedule_handle(job.id).describe()).info
        if fire in info.next_action_times or fire in {a.scheduled_at for a in info.recent_actions}:
            return bounded, [fire + every * i for i in range(n)]
        lead *= 2


async def fired(client: Client, job_id: str, at: datetime, timeout: float = 60.0) -> None:
    """Wait until the server has started the schedule's run for `at`."""

    async def started():
        info = (await client.get_schedule_handle(job_id).describe()).info
        assert at in {a.scheduled_at for a in info.recent_actions}, info.recent_actions

    await assert_eventually(started, timeout=timeout)


async def backfill_slots(
    client: Client,
    job_id: str,
    first: datetime,
    last: datetime,
    *,
    overlap: Overlap = Overlap.ALLOW_ALL,
    margin: timedelta = timedelta(minutes=1),
) -> None:
    """Temporal's backfill of `job_id`'s fire times from `first` to `last`, both included:
    one request over a range reaching `margin` past each."""
    await client.get_schedule_handle(job_id).backfill(
        ScheduleBackfill(start_at=first - margin, end_at=last + margin, overlap=overlap)
    )


# The two 01:30s of New York's fall-back night 2025-11-02 (EDT, then EST): a past night, as
# a backfill of a future night runs nothing.
FALL_BACK_0130 = (
    datetime(2025, 11, 2, 5, 30, tzinfo=UTC),
    datetime(2025, 11, 2, 6, 30, tzinfo=UTC),
)


@contextlib.asynccontextmanager
async def both_0130s_fired(
    client: Client, job: JobSpec, task_queue: str
) -> AsyncIterator[tuple[datetime, datetime]]:
    """`job` (a paused 01:30 New York job) on a schedule as Temporal alone would fire it, a
    plain cron: both 01:30s of the fall-back night, backfilled one after the other. The
    schedule is deleted at the end. Yields the two slots."""
    schedule = compile_schedule(job, task_queue, datetime.now(UTC))
    schedule.spec = ScheduleSpec(cron_expressions=["30 1 * * *"], time_zone_name=job.timezone)
    await client.create_schedule(job.id, schedule)
    try:
        await backfill_slots(client, job.id, *FALL_BACK_0130, overlap=Overlap.BUFFER_ALL)
        yield FALL_BACK_0130
    finally:
        await client.get_schedule_handle(job.id).delete()


async def trigger_at(client: Client, schedule_id: str, at: datetime) -> None:
    """Trigger the schedule with the nominal time `at` (overlap ALLOW_ALL), as
    `python -m schedules trigger` does: the run's slot and workflow id come from `at`."""
    when = Timestamp(
        seconds=int(at.replace(microsecond=0).timestamp()), nanos=at.microsecond * 1000
    )
    trigger = TriggerImmediatelyRequest(
        overlap_policy=ScheduleOverlapPolicy.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL,
        scheduled_time=when,
    )
    request = PatchScheduleRequest(
        namespace=client.namespace,
        schedule_id=schedule_id,
        patch=SchedulePatch(trigger_immediately=trigger),
        identity=client.identity,
        request_id=str(uuid.uuid4()),
    )
    await client.workflow_service.patch_schedule(request)


async def runs_closed(client: Client, job_id: str, slots: list[datetime]) -> list:
    """Wait until the runs of `job_id` for `slots` have closed; return their results.

    A run's row is completed before its workflow closes; until then another start of the
    same slot (the same workflow id) is dropped by Temporal.
    """
    results = []
    for slot in slots:
        workflow_id = f"{job_id}-{slot.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"
        handle = client.get_workflow_handle_for(ScheduledJobWorkflow.run, workflow_id)
        results.append(await asyncio.wait_for(handle.result(), timeout=60))
    return results


def assert_each_invoice_reminded_once(db: psycopg.Connection, total: int) -> None:
    """One reminder in the outbox per invoice, each invoice marked reminded: nothing lost or
    doubled by a fault."""
    assert outbox_count(db) == total
    distinct = db.execute(
        "SELECT count(DISTINCT payload->>'invoice_number') FROM outbox_messages"
    ).fetchone()[0]
    assert distinct == total
    assert (
        db.execute("SELECT count(*) FROM invoices WHERE last_reminder_at IS NOT NULL").fetchone()[0]
        == total
    )


async def end_open_runs(client: Client, task_queue: str, prefix: str = "") -> None:
    """A test's clean-up: terminate the runs still open on `task_queue` (those whose
    workflow ids start with `prefix`, when given)."""
    query = f"TaskQueue = '{task_queue}' AND ExecutionStatus = 'Running'"
    if prefix:
        query = f"WorkflowId STARTS_WITH '{prefix}' AND {query}"
    async for run in client.list_workflows(query):
        await client.get_workflow_handle(run.id, run_id=run.run_id).terminate("test over")


async def managed_become(client: Client, expected: set[str]) -> None:
    """Wait until the schedules this project manages are `expected`: the listing comes from
    visibility, which lags a little behind."""

    async def check():
        assert await managed_schedule_ids(client) == expected

    await assert_eventually(check, timeout=20)


async def delete_managed(client: Client) -> None:
    """Delete every schedule this project manages (one listed but already gone is fine)."""
    for job_id in await managed_schedule_ids(client):
        try:
            await client.get_schedule_handle(job_id).delete()
        except RPCError as err:  # listed by visibility, but already gone
            if err.status != RPCStatusCode.NOT_FOUND:
                raise


async def backfilled_again(
    client: Client, db: psycopg.Connection, job_id: str, slots: list[datetime]
) -> list[dict]:
    """The same `slots` backfilled again once their runs closed (a start of a slot whose
    run is still open is dropped): wait until each row records one duplicate run; the rows."""
    await runs_closed(client, job_id, slots)
    await backfill_slots(client, job_id, slots[0], slots[-1])

    async def duplicated():
        again = executions(db, job_id)
        assert [r["duplicate_runs"] for r in again] == [1] * len(slots)
        return again

    return await assert_eventually(duplicated, timeout=60)
