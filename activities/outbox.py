"""The transactional outbox: messages written with the change that causes them."""

from __future__ import annotations

import psycopg
from psycopg.rows import dict_row

from core.sql import queries

_Q = queries("activities.sql", "outbox")


def recent_messages(conninfo: str, limit: int = 20) -> tuple[list[dict], dict]:
    """The newest `limit` messages (no customer data) and the counts by state."""
    with psycopg.connect(conninfo) as conn:
        cur = conn.cursor(row_factory=dict_row)
        rows = cur.execute(_Q["recent"], {"limit": limit}).fetchall()
        totals = cur.execute(_Q["totals"]).fetchone()
    return rows, totals


def format_messages(rows: list[dict], totals: dict) -> str:
    lines = [f"{'occurred_at (UTC)':<20} {'state':<10} {'type':<16} subject"]
    for row in rows:
        lines.append(
            f"{row['occurred_at']:%Y-%m-%d %H:%M:%S} {row['state']:<10} "
            f"{row['type']:<16} {row['subject'] or ''}"
        )
    lines.append(
        f"total: {totals['pending']} pending, {totals['dispatched']} dispatched, "
        f"{totals['dead']} dead"
    )
    return "\n".join(lines)
