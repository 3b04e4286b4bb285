"""What `trigger --wait` and `backfill --wait` print and exit with, without servers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from schedules.cli.wait import EXIT_STILL_RUNNING, outcome_line, summary
from schedules.server.runs import RunOutcome

SLOT = datetime(2027, 3, 14, 7, 0, tzinfo=UTC)


def run(status: str, **fields) -> RunOutcome:
    return RunOutcome(
        slot=SLOT,
        workflow_id="nightly-2027-03-14T07:00:00Z",
        origin="backfill",
        status=status,
        **fields,
    )


def test_a_run_line_shows_slot_origin_status_duration_counts_and_error():
    done = run("completed", took=timedelta(seconds=95), counts={"reminded": 3, "queued": 3})
    assert outcome_line(done, "America/New_York") == (
        "2027-03-14 03:00 EDT  2027-03-14T07:00:00Z  backfill  completed  took 1m35s  "
        "reminded 3, queued 3"
    )
    failed = run("failed", took=timedelta(seconds=2), reason="relation missing")
    assert outcome_line(failed, "UTC").endswith("failed  took 2s  -  error: relation missing")
    skipped = run("skipped", reason="missed starting deadline")
    assert outcome_line(skipped, "UTC").endswith("took -  -  missed starting deadline")


def test_the_exit_code_is_0_for_runs_and_no_ops_1_for_a_failure_3_for_a_wait_cut_short():
    ok = [run("completed"), run("already completed"), run("skipped")]
    assert summary(ok, "nightly", 900) == ("3 run(s) of nightly: 3 ran or had nothing to do", 0)
    line, code = summary([*ok, run("still running"), run("not started")], "nightly", 60)
    assert code == EXIT_STILL_RUNNING == 3
    assert "2 not finished within 60s (they go on)" in line
    for bad in ("failed", "cancelled", "terminated", "timed out"):
        line, code = summary([run(bad), run("still running")], "nightly", 60)
        assert code == 1 and "1 failed" in line, bad
