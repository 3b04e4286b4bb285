"""`make run` seeds 1,000 weekly-report schedules across 20 zones, once."""

from __future__ import annotations

from datetime import UTC, datetime

from devstack.demo import load_demo_data, seed_weekly_reports


async def test_the_demo_seeds_a_weekly_report_per_customer_once(db, database_url):
    load_demo_data(db, datetime.now(UTC))
    assert await seed_weekly_reports(database_url) == 1000
    load_demo_data(db, datetime.now(UTC))
    assert await seed_weekly_reports(database_url) == 0  # idempotent
    count, zones, kinds = db.execute(
        "SELECT count(*), count(DISTINCT timezone), array_agg(DISTINCT kind)"
        " FROM runtime_schedules WHERE deleted_at IS NULL"
    ).fetchone()
    assert (count, zones, kinds) == (1000, 20, ["weekly-report"])
    mismatched = db.execute(
        "SELECT count(*) FROM runtime_schedules s JOIN customers c"
        " ON c.id = (s.params->>'customer_id')::bigint WHERE c.timezone <> s.timezone"
    ).fetchone()[0]
    assert mismatched == 0
