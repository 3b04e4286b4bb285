"""Batches of runtime slots (`activities/runtime/batch.py`): many slots per activity call,
claimed and completed set-based, each under its own ledger row, fencing token and journal;
a slot whose work raises fails alone; an older attempt of the activity commits nothing."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from psycopg_pool import AsyncConnectionPool
from temporalio.testing import ActivityEnvironment

import jobs
from activities.claim.executions import StaleAttemptError
from activities.run.kinds import build_runtime_kinds
from activities.runtime.batch import SLOTS_PER_ACTIVITY
from activities.runtime.models import BatchInput, BatchResult, batch_workflow_id
from activities.runtime.runs import RuntimeActivities
from jobs import runtime_work
from tests.integration import runtime

pytestmark = pytest.mark.timeout(180)


def noops(db, n: int, minute: datetime, bad: frozenset[int] = frozenset()) -> list[int]:
    """`n` test-noop schedules firing once, at `minute`; those at the indexes `bad` with
    params the kind refuses (their slot's work raises)."""
    one = {"name": "ping", "kind": "test-noop", "cron": "* * * * *", "timezone": "UTC"}
    at = {"next_fire_at": minute, "timing_since": minute, "end_at": minute}
    ids = [runtime.insert_schedule(db, tenant=f"t{i}", **one, **at) for i in range(n)]
    for i in bad:
        db.execute("UPDATE runtime_schedules SET params = '{\"size\": 0}' WHERE id = %s", (ids[i],))
    return ids


def journal(db, schedule_id: int) -> list[tuple]:
    return db.execute(
        "SELECT c.what, c.attempt, c.status FROM commit_journal c"
        " JOIN job_executions e ON e.id = c.execution_id WHERE e.job_name = %s ORDER BY c.seq",
        (f"rt-{schedule_id}",),
    ).fetchall()


async def test_a_batch_runs_each_slot_once_and_a_failing_slot_fails_alone(
    db, database_url, client, task_queue, start_workers
):
    start_workers(1)
    runtime.fresh_ids(db)
    minute = datetime.now(UTC).replace(second=0, microsecond=0)
    # One shard, one batch of 520 slots: the first call's 500 hold the failing slot (so it
    # works them one by one, each in a savepoint), the second's 20 are claimed set-based.
    ids = noops(db, SLOTS_PER_ACTIVITY + 20, minute, bad=frozenset({5}))
    db.execute("UPDATE runtime_schedules SET shard = 0")
    settled_before = ids[7]
    db.execute(
        "INSERT INTO job_executions (job_name, scheduled_at, status, origin, finished_at)"
        " VALUES (%s, %s, 'completed', 'scheduled', now())",
        (f"rt-{settled_before}", minute),
    )
    async with runtime.dispatcher(database_url, client, task_queue) as d:
        counts = await runtime.tick_all(d, minute)
    assert counts.intents == len(ids) and counts.started == 1
    await runtime.settled(db, len(ids))
    rows = dict(
        db.execute(
            "SELECT job_name, status FROM job_executions WHERE job_name LIKE 'rt-%%'"
        ).fetchall()
    )
    assert rows.pop(f"rt-{ids[5]}") == "failed"
    assert set(rows.values()) == {"completed"}
    error = db.execute(
        "SELECT error FROM job_executions WHERE job_name = %s", (f"rt-{ids[5]}",)
    ).fetchone()[0]
    assert "invalid params" in error and "size" in error
    # Each slot under its own row and token: taken over, then completed, under token 1.
    for sid in (ids[0], ids[6], ids[-1]):
        assert journal(db, sid) == [("take_over", 1, "running"), ("complete", 1, "completed")]
    assert journal(db, settled_before) == []  # settled before: left alone
    await runtime.audit_clean(
        database_url, client, task_queue, minute, minute + timedelta(minutes=1)
    )


def as_attempt(batch_id: str, run_id: str, number: int) -> ActivityEnvironment:
    """Temporal attempt `number` of the batch's first activity, in run `run_id`."""
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info,
        activity_id="1",
        attempt=number,
        workflow_id=batch_id,
        workflow_run_id=run_id,
        current_attempt_scheduled_time=datetime.now(UTC),
    )
    return env


async def weekly_batch(db, database_url: str, ids: list[int], minute: datetime) -> BatchResult:
    """The weekly reports of schedules `ids` at `minute`, decided as one batch and run by
    its first attempt (the kind made a batch kind for the test)."""
    batch_id = batch_workflow_id(ids[0], minute)
    db.execute(
        "INSERT INTO runtime_dispatch_intents (schedule_id, scheduled_at, workflow_id, origin)"
        " SELECT unnest(%s::bigint[]), %s, %s, 'scheduled'",
        (ids, minute, batch_id),
    )
    kind = jobs.runtime_kinds()["weekly-report"]
    batched = {kind.name: dataclasses.replace(kind, batch=True)}
    async with AsyncConnectionPool(database_url, min_size=1, max_size=2, open=False) as pool:
        work = build_runtime_kinds(jobs.kinds().values(), batched, pool)
        return await as_attempt(batch_id, "run-1", 1).run(
            RuntimeActivities(pool, work).run_runtime_batch, BatchInput(batch_id=batch_id)
        )


async def test_an_older_attempt_of_a_batch_commits_nothing(db, database_url):
    runtime.fresh_ids(db)
    minute = datetime.now(UTC).replace(second=0, microsecond=0)
    ids = noops(db, 3, minute)
    batch_id = batch_workflow_id(ids[0], minute)
    db.execute(
        "INSERT INTO runtime_dispatch_intents (schedule_id, scheduled_at, workflow_id, origin)"
        " SELECT unnest(%s::bigint[]), %s, %s, 'scheduled'",
        (ids, minute, batch_id),
    )
    async with AsyncConnectionPool(database_url, min_size=1, max_size=2, open=False) as pool:
        activities = RuntimeActivities(pool, runtime_work(pool, None))

        async def attempt(number: int):
            env = as_attempt(batch_id, "run-1", number)
            return await env.run(activities.run_runtime_batch, BatchInput(batch_id=batch_id))

        second = await attempt(2)  # the attempt the server waits for, its first failed
        assert (second.handled, second.completed, second.done) == (3, 3, True)
        before = db.execute("SELECT count(*) FROM commit_journal").fetchone()[0]
        late = await attempt(1)  # woken in a frozen worker after attempt 2 committed
        assert (late.completed, late.already) == (0, 3)
        # Its slot failed under attempt 2: attempt 1 may not take it over again.
        db.execute(
            "UPDATE job_executions SET status = 'failed' WHERE job_name = %s", (f"rt-{ids[1]}",)
        )
        with pytest.raises(StaleAttemptError, match="is stale"):
            await attempt(1)
        assert db.execute("SELECT count(*) FROM commit_journal").fetchone()[0] == before
        newer = await attempt(3)  # the next attempt does take it over, and completes it
        assert (newer.completed, newer.already) == (1, 2)
    assert journal(db, ids[1]) == [
        ("take_over", 1, "running"),
        ("complete", 1, "completed"),
        ("take_over", 2, "running"),
        ("complete", 2, "completed"),
    ]
