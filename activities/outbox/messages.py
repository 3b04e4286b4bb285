"""The transactional outbox: messages written with the change that causes them. What an
operator reads of it is here as data; `jobs.outbox_relay.report` words it."""

from __future__ import annotations

import psycopg
from psycopg.rows import dict_row

from core.sql import queries

_Q = queries("activities.outbox", "outbox")


def recent_messages(conninfo: str, limit: int = 20) -> tuple[list[dict], dict, list[dict]]:
    """The newest `limit` messages (no customer data), the counts by state, and the counts
    of each type by state."""
    with psycopg.connect(conninfo, connect_timeout=5) as conn:
        cur = conn.cursor(row_factory=dict_row)
        rows = cur.execute(_Q["recent"], {"limit": limit}).fetchall()
        totals = cur.execute(_Q["totals"]).fetchone()
        by_type = cur.execute(_Q["by_type_state"]).fetchall()
    return rows, totals, by_type
