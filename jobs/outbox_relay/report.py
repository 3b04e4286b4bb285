"""The outbox as an operator reads it (`python -m schedules outbox`, `python -m worker
outbox`): counts by type and state, then the newest messages, no customer data."""

from __future__ import annotations


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
