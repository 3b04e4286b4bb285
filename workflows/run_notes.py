"""What a run notes at its end for the Temporal UI, from the server (`activities.catchup.run_notes`).

- A run the server started late (a backfill, or catch-up after downtime) asks what the
  server skipped of the backfill over its slot, and its details say it
  (`workflows.details.backfill_note`). On time runs, the vast majority, ask nothing.
- A run that did no work marks itself with `ScheduledJobsOutcome` (its own slot's outcome:
  `already_completed`, `skipped`, `superseded`), so the UI's workflow lists tell it from
  work done; a run that did work carries no such mark and pays nothing for it.

Each step is a local activity on its own path, under a `workflow.patched` branch: runs
started before this release replay as they ran (tests/replay/histories/v6-noop holds runs
that take both). Neither may fail the run: what the server cannot answer is left unsaid.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import CancelledError, FailureError

with workflow.unsafe.imports_passed_through():
    from activities.catchup.backfills import BackfillSkips, SkipsInput
    from activities.catchup.missed import ON_TIME
    from activities.catchup.run_notes import OUTCOME_ATTRIBUTE, RunNotesActivities
    from activities.common.models import Origin

from workflows.models import JobRun, SlotRun

# Patched in v6-noop: a late run asks for its backfill's skips; a no-op run marks itself.
BACKFILL_SKIPS_PATCH = "backfill-skips"
NO_OP_OUTCOME_PATCH = "no-op-outcome"

# A note is worth a few seconds of the run, not its end: then it is left unsaid.
_NOTE = {
    "start_to_close_timeout": timedelta(seconds=20),
    "schedule_to_close_timeout": timedelta(minutes=1),
    "retry_policy": RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3),
}


async def backfill_skips(job: JobRun, slot: datetime, origin: Origin) -> BackfillSkips | None:
    """What the server skipped of the backfill that started this run, if it was started
    late or for an older slot (a backfill); None for any other run."""
    if job.timing is None or origin in ("direct", "manual"):
        return None
    started = workflow.info().start_time
    if origin != "backfill" and started - slot <= ON_TIME + job.timing.jitter:
        return None  # on time: no backfill started it
    if not workflow.patched(BACKFILL_SKIPS_PATCH):
        return None
    try:
        return await workflow.execute_local_activity_method(
            RunNotesActivities.backfill_skips,
            SkipsInput(
                job_name=job.job_name, scheduled_at=slot, started_at=started, timing=job.timing
            ),
            **_NOTE,
        )
    except FailureError as err:  # a local activity's failure comes as its cause
        if isinstance(err, CancelledError):
            raise
        workflow.logger.warning("could not read what the server skipped of the backfill: %s", err)
        return None


async def mark_no_op(own: SlotRun, caught_up: list[SlotRun]) -> None:
    """Mark a run that did no work with its own slot's outcome, once the namespace has the
    attribute (an unknown one would fail the workflow task)."""
    if own.outcome == "completed" or any(s.outcome == "completed" for s in caught_up):
        return
    if not workflow.patched(NO_OP_OUTCOME_PATCH):
        return
    try:
        registered = await workflow.execute_local_activity_method(
            RunNotesActivities.outcome_attribute, **_NOTE
        )
    except FailureError as err:
        if isinstance(err, CancelledError):
            raise
        registered = False
    if registered:
        workflow.upsert_search_attributes([OUTCOME_ATTRIBUTE.value_set(own.outcome)])
