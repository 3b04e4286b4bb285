"""Temporal and the ledger agree on how each slot ended: the checks beyond `running` rows.

Two directions, each judged on what visibility lists for the window (a run listed RUNNING
has been described, `history.read_visibility`: visibility lags, so a listed RUNNING is
never taken for the truth):

- *outcome_mismatch*: a terminal row whose workflow run closed the other way. A row
  `completed` by its own slot's run (workflow id `<job>-<slot>Z`) whose run failed, was
  terminated, timed out or was cancelled; a row `failed` or `compensated` whose run
  completed. A row completed by a run of another slot (a catch-up: the run went on to
  later slots, one of which may have failed) is judged only the second way. `skipped` rows
  are refusals: how their run ended says nothing about them. A row whose run is not listed
  (started outside the window, on another task queue, past retention) is not compared.
- *missing_row*: a closed run of the job's schedule with no row for its slot. Legitimately
  rowless, by the engine's documented rules, and so no finding:
  - a run whose slot has a row claimed by another run: the no-op re-run of a completed or
    skipped slot (a backfill, a trigger, a retry by hand), a run superseded by a newer run
    of the same slot, or a failed run whose slot a later run finished;
  - a run started more than `FUTURE_MARGIN` before its slot (a backfill or trigger of a
    future time): it does nothing and records nothing; the slot's own run comes at its time.
  Every other closed run should have left a row: completed, failed, terminated, timed out
  or cancelled before its claim, the slot's work never happened or its record was lost.

Pure, as `checks`.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from core.ids import workflow_id
from schedules.audit.finding import Finding, row_witnesses
from schedules.audit.history import Visibility

# The engine's documented rule (docs/operating.md, Backfills): a run whose slot is more than
# this after its start refuses it and records nothing. Kept here, not imported: the audit
# states what it expects instead of sharing the engine's code.
FUTURE_MARGIN = timedelta(seconds=60)
CLOSED_OK = "COMPLETED"
IN_FLIGHT = "RUNNING"


def outcome_mismatches(
    job: Any, rows: dict[datetime, Any], visibility: Visibility
) -> Iterator[Finding]:
    """outcome_mismatch: terminal rows whose run closed the other way (see the module)."""
    for row in rows.values():
        if row.status not in ("completed", "failed", "compensated"):
            continue
        if not row.workflow_id or not row.run_id:
            continue
        status = visibility.status(row.workflow_id, row.run_id)
        if status is None or status == IN_FLIGHT:
            continue  # not listed, gone, or still closing
        if row.status == "completed":
            if status == CLOSED_OK or row.workflow_id != workflow_id(job.id, row.scheduled_at):
                continue
            detail = f"row completed, but its workflow run {status.lower()}"
        elif status == CLOSED_OK:
            detail = f"row {row.status}, but its workflow run completed"
        else:
            continue
        yield Finding(
            "outcome_mismatch",
            job.id,
            row.scheduled_at,
            detail,
            row_witnesses(row) | {"run_status": status},
        )


def rowless_runs(
    job: Any,
    rows: dict[datetime, Any],
    visibility: Visibility,
    due: dict[datetime, datetime] | None = None,
) -> Iterator[Finding]:
    """missing_row: closed runs of the job's schedule whose slot has no row (see the module).
    `due` (slot -> when its run is due) names the slots a calendar job's run at a time
    stands for: it is rowless only if none of them has a row."""
    moved: dict[datetime, list[datetime]] = {}
    for slot, when in (due or {}).items():
        moved.setdefault(when, []).append(slot)
    for run in visibility.runs.get(job.id, ()):
        if run.slot is None or run.slot in rows:
            continue
        if any(slot in rows for slot in moved.get(run.slot, ())):
            continue  # a calendar job's run at this time works the slots moved here
        status = visibility.status(run.workflow_id, run.run_id)
        if status is None or status == IN_FLIGHT:
            continue
        if run.started is not None and run.slot > run.started + FUTURE_MARGIN:
            continue  # a future slot's run: refused by design, its own run comes later
        detail = (
            "its workflow run completed, but the ledger has no row for the slot"
            if status == CLOSED_OK
            else f"its workflow run {status.lower()} without leaving a row for the slot"
        )
        yield Finding(
            "missing_row",
            job.id,
            run.slot,
            detail,
            {"workflow_id": run.workflow_id, "run_id": run.run_id, "run_status": status},
        )
