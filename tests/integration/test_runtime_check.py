"""`check` and the metrics report missed and failing runtime schedules by kind, never by
tenant or schedule."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from schedules.health.runtime import runtime_alerts
from tests.integration.runtime import insert_schedule
from worker.gauges import DatabaseGauges


async def test_behind_and_failing_schedules_are_reported_by_kind(db, database_url):
    # The gauges read the database's clock: the test's is taken now, not at collection.
    now = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
    common = {"cron": "* * * * *", "timezone": "UTC", "timing_since": now - timedelta(hours=2)}
    behind = [
        insert_schedule(db, tenant=f"t{i}", name="a", kind="test-noop",
                        next_fire_at=now - timedelta(hours=1), **common)
        for i in range(3)
    ]  # fmt: skip
    insert_schedule(db, tenant="ok", name="a", kind="test-noop", next_fire_at=now, **common)
    insert_schedule(db, tenant="p", name="a", kind="test-noop", paused=True,
                    next_fire_at=now - timedelta(hours=1), **common)  # fmt: skip
    failing = insert_schedule(
        db, tenant="f", name="r", kind="weekly-report", next_fire_at=now, **common
    )
    db.execute(
        "INSERT INTO job_executions (job_name, scheduled_at, status, origin, finished_at)"
        " VALUES (%s, %s, 'failed', 'scheduled', now())",
        (f"rt-{failing}", now - timedelta(minutes=10)),
    )
    alerts = await runtime_alerts(database_url, now, timedelta(days=1), timeout=10)
    assert [(kind, subject) for kind, subject, _ in alerts] == [
        ("missed_runs", "runtime:test-noop"),
        ("last_run_failed", "runtime:weekly-report"),
    ]
    assert alerts[0][2].startswith("3 runtime schedule(s) not dispatched")
    assert all(str(sid) in alerts[0][2] for sid in behind)
    assert "t0" not in " ".join(message for *_, message in alerts)  # no tenant named
    gauges = DatabaseGauges(database_url)
    reading = gauges.read()
    gauges.close()
    assert reading.runtime_behind == {"test-noop": 3}
    assert reading.runtime_failing == {"weekly-report": 1}
    assert not any(job.startswith("rt-") for job in reading.last_success | reading.alert_after)
