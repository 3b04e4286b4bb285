"""The demo data `make run` loads: each job family's `demo.sql`, as of a clock passed in.

Every family's file reads its "now" from the session setting `demo.now` (never from the
database's clock), so the data can be loaded as of any moment: `make run` loads it as of
the moment it starts, the README's tour test as of a date far from today. Each file guards
itself to load only once.
"""

from __future__ import annotations

import json
from datetime import datetime

import psycopg

from jobs import demo_data


def load_demo_data(conn: psycopg.Connection, now: datetime) -> list[str]:
    """Run every family's demo.sql on `conn` as of `now` (aware); the families loaded."""
    if now.tzinfo is None:
        raise ValueError(f"the demo clock must carry a time zone, got {now.isoformat()}")
    conn.execute("SELECT set_config('demo.now', %s, false)", (now.isoformat(),))
    families = []
    for family, demo in demo_data():
        conn.execute(demo.read_text())
        families.append(family)
    return families


async def seed_weekly_reports(url: str) -> int:
    """Give every demo customer a `weekly-report` runtime schedule, Mondays 08:00 in its
    zone, through the import of `schedules.tenants` (idempotent per tenant and name, so a
    second `make run` adds none); the number created."""
    from schedules import tenants  # the API on top, as an application would call it

    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT id, tenant, timezone FROM customers ORDER BY id").fetchall()
    lines = [
        json.dumps(
            {
                "tenant": tenant,
                "name": "weekly-report",
                "kind": "weekly-report",
                "cron": "0 8 * * 1",
                "timezone": zone,
                "params": {"customer_id": customer_id},
                "catchup": "latest",
            }
        )
        for customer_id, tenant, zone in rows
    ]
    report = await tenants.import_lines(url, lines, by="devstack")
    return report.created
