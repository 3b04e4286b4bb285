"""Pauses in the audit: fire times while a recorded pause held are not due.

Temporal keeps no pause history, so this project records the pauses its own tooling makes
(`schedules pause` / `resume`, and `sync` applying a catalog's `paused = true`) in
`schedule_pauses` (`schedules.pauses`). A recorded interval [paused_at, resumed_at) excuses
its fire times from coverage: a row there is fine (a backfill or trigger), none is too.

A pause made elsewhere (the Temporal UI, `temporal schedule toggle`) is not recorded:
- still in force: the job is judged up to its last recorded slot (as for a pause the
  catalog asks for, which is intended), and the fire times since are reported once, as an
  `inconclusive` finding naming how many and from when, so they are neither excused
  silently nor called lost;
- lifted since: its fire times are `lost` unless a run after it recorded them (the first
  scheduled run after a pause records the missed ones as skipped: catch-up).

Pure, as `checks`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from core.ids import workflow_id
from schedules.audit.finding import Finding
from schedules.audit.history import Window

Pause = tuple[datetime, datetime | None]  # [paused_at, resumed_at); None: still paused
_SCHEDULED = ("scheduled", "catch-up")  # rows the schedule's own firing recorded


def excused(pauses: Sequence[Pause], fire: datetime) -> bool:
    """Whether a recorded pause held at `fire`."""
    return any(start <= fire and (end is None or fire < end) for start, end in pauses)


def in_force(pauses: Sequence[Pause], state: Any, rows: dict[datetime, Any]) -> list[Pause]:
    """The recorded pauses as the audit applies them. A pause still open while the schedule
    runs again was lifted by other means (the UI): it holds only until the first row the
    schedule itself recorded after it (a scheduled or catch-up one), so an unrecorded resume
    never excuses the fire times after it."""
    if state is None or not state.exists or state.paused:
        return list(pauses)
    applied = []
    for start, end in pauses:
        if end is None:
            ran = [t for t, r in rows.items() if t >= start and r.origin in _SCHEDULED]
            end = min(ran, default=start)
        applied.append((start, end))
    return applied


def paused_scope(state: Any, pauses: Sequence[Pause]) -> bool:
    """Whether the schedule is paused now under a recorded pause: judged up to the end of
    the window, its fire times since the pause excused."""
    return bool(state is not None and state.exists and state.paused) and any(
        end is None for _, end in pauses
    )


def unrecorded_pause(
    job: Any,
    scope_end: datetime | None,
    fires: Sequence[datetime],
    state: Any,
    pauses: Sequence[Pause],
    window: Window,
) -> Iterator[Finding]:
    """One `inconclusive` finding for the fire times after the last recorded slot of a
    schedule paused now by other means than this project's tooling (see the module)."""
    if scope_end is None or state is None or not state.exists or not state.paused:
        return
    if job.paused or paused_scope(state, pauses):
        return  # intended by the catalog, or recorded
    due_by = min(window.end, window.now - window.settle)
    unjudged = [f for f in fires if scope_end <= f < due_by]
    if not unjudged:
        return
    yield Finding(
        "inconclusive",
        job.id,
        unjudged[0],
        f"{len(unjudged)} fire time(s) from here to {unjudged[-1]:%Y-%m-%dT%H:%M:%SZ} not "
        "judged: the schedule is paused now and no pause is recorded (paused in the UI or "
        "by `temporal schedule toggle`?); `schedules explain` tells each one",
        {
            "fire_times": len(unjudged),
            "first": unjudged[0],
            "last": unjudged[-1],
            "workflow_id": workflow_id(job.id, unjudged[0]),
            "schedule_paused": True,
        },
    )
