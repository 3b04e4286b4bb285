"""The demo data `make run` loads: each job family's `demo.sql`, as of a clock passed in.

Every family's file reads its "now" from the session setting `demo.now` (never from the
database's clock), so the data can be loaded as of any moment: `make run` loads it as of
the moment it starts, the README's tour test as of a date far from today. Each file guards
itself to load only once.
"""

from __future__ import annotations

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
