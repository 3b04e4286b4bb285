"""What a run shows in the Temporal UI (its current details): text only, no workflow logic.

`ScheduledJobWorkflow` and `JobSteps` decide; this module words it. A headline names the
job, the slot in the job's time zone and how the run came about; the lines under it say
where the run is.

Passed through Temporal's sandbox (`worker.run.PASSTHROUGH`): imported once per worker, not
per workflow run; it holds no state and calls nothing non-deterministic.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from workflows.models import SlotRun

if TYPE_CHECKING:
    from activities.catchup.backfills import BackfillSkips


def run_headline(job_name: str, slot: datetime, local_time: str, origin: str) -> str:
    """`**job** · 2027-03-14 03:00 EDT · scheduled`; UTC when the plan gave no local time."""
    when = local_time or f"{slot:%Y-%m-%d %H:%M} UTC"
    return f"**{job_name}** · {when} · {origin}"


def showing(head: str, state: str) -> str:
    """The details: the headline, a blank line, the state."""
    return f"{head}\n\n{state}"


def summary(head: str, own: SlotRun, caught_up: list[SlotRun], skipped: int, gap: int) -> str:
    """How the run ended: its own slot's outcome and counts, then what it caught up on."""
    counts = ", ".join(f"{k} {v}" for k, v in own.counts.items()) or "no counts"
    lines = [head, "", f"{own.outcome}: {counts}"]
    if own.reason:
        lines.append(own.reason)
    if caught_up or skipped:
        lines.append(
            f"caught up {len(caught_up)} missed run(s); {skipped} recorded skipped"
            + (f" ({gap} beyond the catch-up cap)" if gap else "")
        )
    return "\n".join(lines)


def _utc(instant: datetime) -> str:
    return f"{instant:%Y-%m-%d %H:%M:%S}Z"


def backfill_note(job_name: str, skips: BackfillSkips) -> str:
    """What the server skipped of the backfill that started the run, and how to run it."""
    shown = ", ".join(_utc(s) for s in skips.skipped[:5])
    more = f" and {len(skips.skipped) - 5} more" if len(skips.skipped) > 5 else ""
    first, last = skips.skipped[0], skips.skipped[-1]
    lines = [
        f"the server skipped {len(skips.skipped)} slot(s) of the backfill over this run "
        f"({_utc(skips.start)} to {_utc(skips.end)}, overlap {skips.overlap}): {shown}{more}"
        f" (its count of slots of this job skipped by overlap: {skips.counted})",
        f"run them with `python -m schedules backfill {job_name} --start {first:%Y-%m-%dT%H:%M:%SZ} "
        f"--end {last + timedelta(seconds=1):%Y-%m-%dT%H:%M:%SZ}` (it buffers every slot), "
        "or choose Overlap Policy 'Buffer All' in the UI's Backfill dialog",
    ]
    if skips.slots > skips.checked:
        lines.append(f"(only the backfill's first {skips.checked} slots were looked up)")
    return "\n\n".join(lines)  # paragraphs of the UI's markdown


def step_progress(
    number: int, total: int, name: str, items_done: int | None, items_total: int | None
) -> str:
    """`step 2 of 3: charge, 1,200 of 5,000` (no items when the step does not count them)."""
    items = "" if items_total is None else f", {items_done or 0:,} of {items_total:,}"
    return f"step {number} of {total}: {name}{items}"
