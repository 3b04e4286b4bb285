"""`test-sleep`, the noisy-neighbour bench's runtime kind (jobs/runtime_sleep), on real
servers: its slot waits its seconds outside any transaction, then completes once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.integration import runtime

pytestmark = pytest.mark.timeout(120)

NOW = datetime(2026, 11, 30, 14, 0, tzinfo=UTC)


async def test_a_sleep_slot_waits_its_seconds_then_completes_once(
    db, database_url, client, task_queue, start_workers
):
    start_workers(1)
    runtime.fresh_ids(db)
    sid = runtime.insert_schedule(
        db, tenant="big", name="slow", kind="test-sleep", cron="* * * * *", timezone="UTC",
        next_fire_at=NOW, timing_since=NOW, params={"seconds": 1.5},
    )  # fmt: skip
    async with runtime.dispatcher(database_url, client, task_queue) as d:
        await d.tick(sid % 4, NOW)
    await runtime.settled(db, 1)
    (row,) = runtime.slot_rows(db, sid)
    assert row["status"] == "completed" and row["result"]["counts"] == {"slept": 1}
    assert row["finished_at"] - row["started_at"] >= timedelta(seconds=1.5)
    await runtime.audit_clean(
        database_url, client, task_queue, NOW - timedelta(hours=1), NOW + timedelta(seconds=1),
        late=runtime.LATE,
    )  # fmt: skip
