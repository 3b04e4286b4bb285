"""The transactional outbox: messages written with the change that causes them."""

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


def format_messages(rows: list[dict], totals: dict, by_type: list[dict]) -> str:
    """Counts by type and state first, then the newest messages."""
    width = max([len("type"), *(len(t["type"]) for t in by_type)])
    lines = [f"{'type':<{width}} {'pending':>9} {'dispatched':>11} {'dead':>6}"]
    for t in by_type:
        lines.append(f"{t['type']:<{width}} {t['pending']:>9} {t['dispatched']:>11} {t['dead']:>6}")
    lines.append(
        f"{'total':<{width}} {totals['pending']:>9} {totals['dispatched']:>11} {totals['dead']:>6}"
    )
    kind = max([len("type"), *(len(row["type"]) for row in rows)])
    lines += [
        "",
        f"newest {len(rows)}:",
        f"{'occurred_at (UTC)':<19} {'state':<10} {'type':<{kind}} subject",
    ]
    for row in rows:
        lines.append(
            f"{row['occurred_at']:%Y-%m-%d %H:%M:%S} {row['state']:<10} "
            f"{row['type']:<{kind}} {row['subject'] or '-'}"
        )
    return "\n".join(lines)
