"""The text a run shows in the Temporal UI (`workflows.details`), apart from the logic."""

from __future__ import annotations

from datetime import UTC, datetime

from workflows.details import run_headline, showing, step_progress, summary
from workflows.models import SlotRun

SLOT = datetime(2027, 3, 14, 7, 0, tzinfo=UTC)


def test_the_headline_names_the_job_the_local_time_and_the_origin():
    head = run_headline("invoice-reminders", SLOT, "2027-03-14 03:00 EDT", "scheduled")
    assert head == "**invoice-reminders** · 2027-03-14 03:00 EDT · scheduled"
    assert run_headline("j", SLOT, "", "direct") == "**j** · 2027-03-14 07:00 UTC · direct"
    assert showing(head, "running") == f"{head}\n\nrunning"


def test_the_summary_gives_the_outcome_counts_and_what_was_caught_up():
    own = SlotRun(scheduled_at=SLOT, outcome="completed", counts={"sent": 12, "queued": 12})
    missed = SlotRun(scheduled_at=SLOT, outcome="completed")
    assert summary("H", own, [], 0, 0) == "H\n\ncompleted: sent 12, queued 12"
    assert summary("H", own, [missed], 3, 2).splitlines()[-1] == (
        "caught up 1 missed run(s); 3 recorded skipped (2 beyond the catch-up cap)"
    )
    skipped = SlotRun(scheduled_at=SLOT, outcome="skipped", reason="missed starting deadline")
    assert summary("H", skipped, [], 0, 0) == "H\n\nskipped: no counts\nmissed starting deadline"


def test_a_step_shows_its_items_when_it_counts_them():
    assert step_progress(2, 3, "charge", 1200, 5000) == "step 2 of 3: charge, 1,200 of 5,000"
    assert step_progress(1, 3, "open", None, None) == "step 1 of 3: open"
