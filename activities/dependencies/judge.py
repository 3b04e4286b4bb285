"""Which upstream slots a slot waits for, and the judgement of a wait (pure).

Slots map by **instants**, never by dates or wall-clock names, so different crons, zones
and DST days match (docs/dependencies.md):

- `same`: the upstream's fire time at our slot's instant, if it has one there (the catalog
  refuses a `same` whose fire times do not line up);
- `window`: the upstream's fire times in `(previous, ours]`, where `previous` is our own
  fire time before this slot (on the grid of our cron, whatever our bounds): a nightly
  02:00 New York job waits for 24 hourly slots, 23 on the spring-forward night and 25 on
  the fall-back one;
- `latest`: the upstream's last fire time at or before our slot.

A job with a business calendar (docs/calendars.md) maps by its *slots*, the unadjusted
fire times its ledger is keyed by, never by the instants its calendar moves them to: a
Thursday slot that a holiday moves to Friday is still Thursday's, and a slot its calendar
skips never runs, so it is never waited for. Our own `window` starts at our previous slot
on our cron's grid, whether or not our calendar ran it.

An upstream slot from before the upstream's current timing took effect (`since`: its
schedule's `timing_since`, a runtime schedule's column) is never expected: it was never
due, so a fresh stack, or an upstream added after its downstream, never waits for it.

The upstream's truth is the ledger: a mapped slot is done when its `job_executions` row
is `completed`; `failed`, `compensated` and `skipped` rows settled without doing the work.
`judge` turns that into one of ready, waiting, skip or run by each dependency's policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from activities.common.dependency_models import (
    MAX_FAILED,
    Dependency,
    SlotMapping,
    UpstreamProgress,
    WaitInput,
    WaitResult,
    deadline_of,
)
from timing import Timing, zone

_TICK = timedelta(microseconds=1)
SETTLED_UNDONE = ("failed", "compensated", "skipped")
SHOWN_FAILURES = 3


_LOOKBACK = (timedelta(days=1), timedelta(days=32), timedelta(days=400))


def _grid(timing: Timing) -> Timing:
    """The timing's slots without its bounds or calendar (our previous slot is on the grid
    even before our start_at, and on a day our calendar closes)."""
    return timing.plain.model_copy(update={"start_at": None, "end_at": None})


def previous_slot(ours: Timing, slot: datetime) -> datetime | None:
    """Our fire time before `slot` (the start of a `window`, exclusive)."""
    return _grid(ours).last_before(slot)


def _slots(timing: Timing, start: datetime, end: datetime) -> list[datetime]:
    """The slots in `[start, end)` that run: without a calendar its fire times; with one,
    the unadjusted fire times its calendar does not skip (wherever it moves them)."""
    if timing.grid is None:
        return timing.fire_times(start, end)
    return [s for s in timing.plain.fire_times(start, end) if timing.run_at(s) is not None]


def _last_slot(timing: Timing, instant: datetime) -> datetime | None:
    """The newest slot that runs strictly before `instant`."""
    if timing.grid is None:
        return timing.last_before(instant)
    for span in _LOOKBACK:  # a calendar skips days, never more than a year of them
        if found := _slots(timing, instant - span, instant):
            return found[-1]
    return None


def upstream_slots(
    mapping: SlotMapping,
    ours: Timing | None,
    slot: datetime,
    upstream: Timing,
    since: datetime | None = None,
) -> list[datetime]:
    """The upstream slots mapped onto our `slot` (oldest first), none before `since`."""
    if mapping == "same":
        found = _slots(upstream, slot, slot + _TICK)
    elif mapping == "latest":
        latest = _last_slot(upstream, slot + _TICK)
        found = [latest] if latest is not None else []
    else:
        previous = previous_slot(ours, slot) if ours is not None else None
        start = previous + _TICK if previous is not None else (since or slot)
        found = _slots(upstream, start, slot + _TICK)
    return [f for f in found if since is None or f >= since]


def progress(
    dep: Dependency,
    ledger: str,
    upstream_zone: str,
    mapped: Sequence[datetime],
    rows: dict[datetime, tuple[str, str | None]],
) -> UpstreamProgress:
    """How far the upstream is: `rows` are its ledger rows of the mapped slots (status,
    error), absent for a slot that has none yet."""
    found = UpstreamProgress(
        upstream=dep.upstream, ledger=ledger, zone=upstream_zone, mapped=len(mapped)
    )
    for slot in mapped:
        status, error = rows.get(slot, ("pending", None))
        if status == "completed":
            found.done += 1
        elif status in SETTLED_UNDONE:
            found.failed_count += 1
            if len(found.failed) < MAX_FAILED:
                first_line = (error or "").splitlines()[0][:200] if error else ""
                found.failed.append((slot, status, first_line))
        else:
            found.pending += 1
            found.pending_first = found.pending_first or slot
            found.pending_last = slot
    return found


def missing(dep: Dependency, why: str) -> UpstreamProgress:
    """An upstream that cannot be found (deleted, never scheduled): it can complete
    nothing, so it counts as failed."""
    return UpstreamProgress(upstream=dep.upstream, missing=why)


def judge(wait: WaitInput, upstreams: Sequence[UpstreamProgress], now: datetime) -> WaitResult:
    """Ready, waiting, or a decision, by each dependency's policy at `now`:

    - every mapped slot completed: that dependency is met;
    - a slot failed or was skipped (or the upstream is gone): `skip` decides at once;
      `run` writes those slots off and waits for the rest until the deadline; `wait`
      keeps waiting (a re-run or a backfill of the upstream may still complete it);
    - the deadline passed with slots outstanding: `skip` skips, `run` runs, `wait` keeps
      waiting, overdue (`check` alerts).

    Any dependency that decides skip skips the slot; any still waiting keeps it waiting;
    otherwise it runs (`run` when a dependency was written off, else `ready`).
    """
    deadlines = [deadline_of(wait.scheduled_at, wait.began_at, d.within) for d in wait.depends_on]
    waiting, overdue, skip, ran_anyway = [], False, [], []
    for dep, up, deadline in zip(wait.depends_on, upstreams, deadlines, strict=True):
        if not up.outstanding:
            continue
        late = now >= deadline
        troubled = bool(up.failed_count or up.missing)
        if dep.on_failure == "skip" and (troubled or late):
            skip.append(_trouble(up, dep, deadline, late, wait.zone))
        elif dep.on_failure == "run" and (late or not up.pending):
            ran_anyway.append(_trouble(up, dep, deadline, late, wait.zone))
        else:
            waiting.append(up)
            overdue = overdue or late
    open_deadlines = [
        d for d, up in zip(deadlines, upstreams, strict=True) if up.outstanding
    ] or deadlines
    result = WaitResult(state="ready", deadline=min(open_deadlines), upstreams=list(upstreams))
    if skip:
        return result.model_copy(update={"state": "skip", "reason": "; ".join(skip)})
    if waiting:
        text = "; ".join(waiting_text(up) for up in waiting)
        when = _local(result.deadline, wait.zone)
        text += f" (past its deadline {when})" if overdue else f" (deadline {when})"
        return result.model_copy(update={"state": "waiting", "overdue": overdue, "progress": text})
    if ran_anyway:
        reason = "run anyway: " + "; ".join(ran_anyway)
        return result.model_copy(update={"state": "run", "reason": reason})
    return result.model_copy(update={"progress": ready_text(upstreams)})


def next_deadline(wait: WaitInput, result: WaitResult, now: datetime) -> datetime | None:
    """The next deadline after `now` of a dependency still outstanding: when the wait's
    judgement can change without any upstream settling."""
    future = [
        deadline_of(wait.scheduled_at, wait.began_at, dep.within)
        for dep, up in zip(wait.depends_on, result.upstreams, strict=True)
        if up.outstanding
    ]
    later = [d for d in future if d > now]
    return min(later, default=None)


# --- wording ------------------------------------------------------------------------------


def _local(instant: datetime, zone_name: str, fmt: str = "%Y-%m-%d %H:%M %Z") -> str:
    return instant.astimezone(zone(zone_name)).strftime(fmt)


def span_text(slots: Sequence[datetime], zone_name: str) -> str:
    """`2026-11-01 03:00-05:00 UTC`, or one time, in the upstream's zone."""
    first, last = slots[0], slots[-1]
    if first == last:
        return _local(first, zone_name)
    same_day = first.astimezone(zone(zone_name)).date() == last.astimezone(zone(zone_name)).date()
    end = _local(last, zone_name, "%H:%M %Z" if same_day else "%Y-%m-%d %H:%M %Z")
    return f"{_local(first, zone_name, '%Y-%m-%d %H:%M')}\u2013{end}"


def waiting_text(up: UpstreamProgress) -> str:
    """`waiting for hourly-sync 2026-11-01 03:00-05:00 UTC, 21 of 24 done` (+ failures)."""
    if up.missing:
        return f"waiting for {up.upstream}: {up.missing}"
    ends = [t for t in (up.pending_first, up.pending_last) if t is not None]
    outstanding = sorted([*ends, *(f[0] for f in up.failed)])
    span = span_text([outstanding[0], outstanding[-1]], up.zone)
    text = f"waiting for {up.upstream} {span}, {up.done} of {up.mapped} done"
    if up.failed_count:
        text += f", {up.failed_count} {_failures(up)}"
    return text


def ready_text(upstreams: Sequence[UpstreamProgress]) -> str:
    parts = [f"{up.upstream}: {up.done} of {up.mapped} slot(s) done" for up in upstreams]
    return "upstream ready: " + "; ".join(parts)


def _failures(up: UpstreamProgress) -> str:
    shown = ", ".join(
        f"{_local(slot, up.zone)} {status}" + (f" ({error})" if error else "")
        for slot, status, error in up.failed[:SHOWN_FAILURES]
    )
    left = up.failed_count - min(len(up.failed), SHOWN_FAILURES)
    more = f" and {left} more" if left > 0 else ""
    return f"settled without completing: {shown}{more}"


def _trouble(
    up: UpstreamProgress, dep: Dependency, deadline: datetime, late: bool, our_zone: str
) -> str:
    """Why a dependency decided: its failed slots, or those not done by the deadline."""
    if up.missing:
        return f"upstream {up.upstream}: {up.missing}"
    if up.failed_count:
        return f"upstream {up.upstream}: {up.failed_count} slot(s) {_failures(up)}"
    assert late and up.pending_first is not None and up.pending_last is not None
    return (
        f"upstream {up.upstream}: {up.pending} of {up.mapped} slot(s) not completed "
        f"within {_duration(dep.within)} (deadline {_local(deadline, our_zone)}): "
        f"{span_text([up.pending_first, up.pending_last], up.zone)}"
    )


def _duration(value: timedelta) -> str:
    seconds = int(value.total_seconds())
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [
        f"{n}{unit}" for n, unit in ((days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")) if n
    ]
    return "".join(parts) or "0s"


def utc(instant: datetime) -> datetime:
    return instant.astimezone(UTC)
