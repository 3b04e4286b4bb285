"""`Happened`: what a run's transaction did that the metrics count, returned by each step of
its logic, joined, and recorded once after the commit (issue 43, item 7)."""

from __future__ import annotations

from activities.common.telemetry import Happened


def test_a_begin_joins_what_its_plan_claim_and_work_returned():
    plan = Happened("j", skips=("catchup_policy", "repeated_local_time"), catchup_gap=2)
    claim = Happened("j", claim=(7, 1.5, False))
    work = Happened("j", duration=0.25)
    assert work + plan + claim == Happened(
        "j",
        skips=("catchup_policy", "repeated_local_time"),
        catchup_gap=2,
        claim=(7, 1.5, False),
        duration=0.25,
    )


def test_joining_nothing_changes_nothing():
    found = Happened("j", skips=("future_slot",), catchup_gap=0, already_completed=True)
    assert found + Happened("j") == found == Happened("j") + found
