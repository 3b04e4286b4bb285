"""The outbox's operator text (`jobs.outbox_relay.report`): counts by type and state, then
the newest messages, aligned, with no customer data."""

from __future__ import annotations

from datetime import UTC, datetime

from jobs.outbox_relay.report import format_messages


def test_the_report_counts_by_type_then_lists_the_newest():
    at = datetime(2027, 3, 14, 7, 0, tzinfo=UTC)
    rows = [
        {"occurred_at": at, "state": "dead", "type": "invoice_reminder", "subject": "INV-7"},
        {"occurred_at": at, "state": "pending", "type": "slot_notice", "subject": None},
    ]
    by_type = [
        {"type": "invoice_reminder", "pending": 0, "dispatched": 4, "dead": 1},
        {"type": "slot_notice", "pending": 1, "dispatched": 0, "dead": 0},
    ]
    totals = {"pending": 1, "dispatched": 4, "dead": 1}
    assert format_messages(rows, totals, by_type).splitlines() == [
        "type               pending  dispatched   dead",
        "invoice_reminder         0           4      1",
        "slot_notice              1           0      0",
        "total                    1           4      1",
        "",
        "newest 2:",
        "occurred_at (UTC)   state      type             subject",
        "2027-03-14 07:00:00 dead       invoice_reminder INV-7",
        "2027-03-14 07:00:00 pending    slot_notice      -",
    ]
