"""`schedule_digest`: what a re-sync trusts instead of describing each schedule."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from schedules.catalog.compile import compile_schedule, schedule_digest
from schedules.catalog.model import parse_catalog

NOW = datetime(2026, 11, 29, 16, 30, tzinfo=UTC)
NIGHTLY = {"kind": "invoice-reminders", "cron": "30 2 * * *", "timezone": "America/New_York"}


def digest(table: dict, task_queue: str = "q", **compile_args) -> str:
    (job,) = parse_catalog({"nightly": table})
    return schedule_digest(compile_schedule(job, task_queue, **{"now": NOW, **compile_args}))


def test_the_digest_ignores_timing_since_and_the_day_it_is_compiled():
    # Sync keeps timing_since from the server, and a DST spec only moves with the year.
    assert digest(NIGHTLY) == digest(NIGHTLY, timing_since=NOW)
    assert digest(NIGHTLY) == digest(NIGHTLY, now=datetime(2026, 1, 1, 12, tzinfo=UTC))


@pytest.mark.parametrize(
    "change",
    [
        {"cron": "31 2 * * *"},
        {"timezone": "Europe/Berlin"},
        {"paused": True},
        {"paused": True, "note": "held for the audit"},
        {"description": "only the text differs"},
        {"params": {"remind_every_days": 3}},
        {"overlap": "buffer_one"},
        {"catchup_window": "2h"},
        {"jitter": "1m"},
    ],
)
def test_any_catalog_change_changes_the_digest(change):
    assert digest({**NIGHTLY, **change}) != digest(NIGHTLY)


def test_the_task_queue_and_a_new_horizon_year_change_the_digest():
    assert digest(NIGHTLY, task_queue="other") != digest(NIGHTLY)
    # The UTC-compiled spec of a DST job covers whole years from the current one.
    assert digest(NIGHTLY, now=datetime(2027, 1, 2, tzinfo=UTC)) != digest(NIGHTLY)


def test_a_pending_timing_changes_the_digest():
    # A sync that stopped before stamping timing_since leaves a digest no finished schedule
    # has, so the next sync describes the job and finishes it.
    assert digest(NIGHTLY, timing_pending=True) != digest(NIGHTLY)
    assert digest(NIGHTLY, timing_pending=True) == digest(NIGHTLY, timing_pending=True)
