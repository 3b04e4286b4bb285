"""What the audit judges beyond the fire times of a schedule's timing (issue 36, item 7):
the slots a runtime schedule's dispatcher had decided when a pause or delete came, the
slots a backfill asked for before the job's timing took effect, and the backfill command
looking for its own request's first run. Each anomaly is one a fault leaves: seeded in the
database as it would leave it, or made for real (the dev server drops a backfill's start
whose workflow id a running workflow holds, as it drops one lost among schedule updates).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from schedules import tenants
from schedules.audit.history import Window
from schedules.audit.runtime import audit_runtime
from tests.integration.runtime import dispatcher, fresh_ids, settled, tick_all

pytestmark = pytest.mark.timeout(300)

_NOW = datetime.now(UTC)
T0 = _NOW.replace(minute=_NOW.minute // 10 * 10, second=0, microsecond=0) - timedelta(hours=2)
LATE = timedelta(days=1)  # the dispatcher's clock is two hours behind: its runs are that late


def at(minutes: int, seconds: int = 0) -> datetime:
    return T0 + timedelta(minutes=minutes, seconds=seconds)


def clock(instant: datetime):
    return lambda: instant


def findings(report) -> list[tuple[str, str | None, datetime | None]]:
    return sorted((f.kind, f.job, f.slot) for f in report.findings)


async def test_a_slot_decided_just_before_a_pause_or_delete_is_judged(
    db, database_url, client, task_queue, start_workers
):
    """Three every-minute schedules, dispatched at 1 and 2 and stopped at 3:30, inside the
    pause's grace of 3:00. Two the dispatcher had passed 3:00 of, recording nothing (the
    fault): one paused, one deleted; their 3:00 was decided, so it is lost. The third was
    paused before the dispatcher reached 3:00: not decided, not due."""
    start_workers(1)
    fresh_ids(db)

    def every_minute(name: str) -> dict:
        return {"tenant": "acme", "name": name, "kind": "test-noop", "cron": "* * * * *",
                "timezone": "UTC"}  # fmt: skip

    made = {
        name: (
            await tenants.create(database_url, every_minute(name), clock=clock(at(0, 30)))
        ).schedule.id
        for name in ("paused", "deleted", "held")
    }
    async with dispatcher(database_url, client, task_queue) as d:
        for minute in (1, 2):
            await tick_all(d, at(minute))
        await settled(db, 6)
    db.execute(
        "UPDATE runtime_schedules SET next_fire_at = %s WHERE id = ANY(%s)",
        (at(4), [made["paused"], made["deleted"]]),
    )
    stopped = clock(at(3, 30))
    await tenants.pause(database_url, made["paused"], "maintenance", clock=stopped)
    await tenants.pause(database_url, made["held"], "maintenance", clock=stopped)
    await tenants.delete(database_url, made["deleted"], clock=stopped)

    window = Window(at(0), at(5), datetime.now(UTC), timedelta(0), LATE, timedelta(minutes=15))
    judged = await audit_runtime(database_url, client, window, task_queue=task_queue, timeout=30)
    assert findings(judged) == sorted(
        ("lost", f"rt-{made[name]}", at(3)) for name in ("paused", "deleted")
    )
    assert {s.job.id: s.due for s in judged.scopes} == {
        f"rt-{made['paused']}": 3,
        f"rt-{made['deleted']}": 3,
        f"rt-{made['held']}": 2,
    }
