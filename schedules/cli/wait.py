"""What `trigger --wait` and `backfill --wait` print of the runs they waited for.

One line a run (its slot in the job's zone and UTC, origin, status, took, counts, error),
then a closing line whose exit code says whether every run did what was asked.
"""

from __future__ import annotations

from schedules.catalog.durations import format_duration
from schedules.catalog.times import local_text, utc_text
from schedules.cli.format import counts_text
from schedules.server.runs import RunOutcome

# The exit code of a wait that ended before every run did (the runs go on).
EXIT_STILL_RUNNING = 3
WAITED_EXIT = (
    "with --wait: 0 every run completed or correctly did nothing (already completed, "
    "skipped by the job's policy); 1 a run failed (its error is printed); "
    f"{EXIT_STILL_RUNNING} not every run finished within --timeout (they go on: `python -m "
    "schedules runs JOB` follows them)"
)


def outcome_line(outcome: RunOutcome, timezone: str) -> str:
    """One run as `runs` shows it: slot (job's zone, UTC), origin, status, took, counts."""
    took = format_duration(outcome.took) if outcome.took is not None else "-"
    cells = [
        local_text(outcome.slot, timezone),
        utc_text(outcome.slot),
        outcome.origin,
        outcome.status,
        f"took {took}",
        counts_text(outcome.counts),
    ]
    if outcome.caught_up:
        cells.append(f"caught up {outcome.caught_up} missed run(s)")
    if outcome.reason:
        cells.append(("error: " if not outcome.ok else "") + outcome.reason)
    return "  ".join(cells)


def summary(outcomes: list[RunOutcome], job_id: str, timeout: float) -> tuple[str, int]:
    """The closing line and the exit code: 0 all ran (or were no-ops), 1 one failed,
    `EXIT_STILL_RUNNING` some had not finished by the deadline."""
    failed = [o for o in outcomes if o.finished and not o.ok]
    waiting = [o for o in outcomes if not o.finished]
    done = len(outcomes) - len(failed) - len(waiting)
    parts = [f"{done} ran or had nothing to do"]
    if failed:
        parts.append(f"{len(failed)} failed")
    if waiting:
        parts.append(f"{len(waiting)} not finished within {timeout:g}s (they go on)")
    line = f"{len(outcomes)} run(s) of {job_id}: {', '.join(parts)}"
    if waiting or failed:
        line += f"; see `python -m schedules runs {job_id}`"
    if failed:
        return line, 1
    return line, EXIT_STILL_RUNNING if waiting else 0


def print_summary(outcomes: list[RunOutcome], job_id: str, timeout: float) -> int:
    line, code = summary(outcomes, job_id, timeout)
    print(line)
    return code
