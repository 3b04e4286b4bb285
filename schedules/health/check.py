"""Is every job of the catalog running on time? The evaluation behind `python -m schedules check`.

For each job, from its `job_executions` rows, its Temporal schedule and the time `now`:
last run, last success, next due, and an alert for each of

- `not_completed`: the latest fire time that is due (its expected window and grace have
  passed) has no completed or skipped run;
- `last_run_failed`: the latest finished run failed;
- `missed_runs`: fire times in the lookback with no execution row at all;
- `catchup_gap`: missed fire times dropped because they exceeded the job's catch-up cap
  (skipped rows whose error starts with "catch-up gap"), recorded during the lookback;
- `slow_run`: the latest completed run (or the one running now) took more than 1.5 x the
  median of the 20 completed runs before it, and at least a minute more;
- `backfill_skipped`: slots of a backfill requested during the lookback that the server
  skipped under its overlap policy (the Web UI dialog's default, Skip) and that nothing has
  run since (`activities.catchup.backfills` names them);
- `dead_outbox`: outbox messages the relay gave up on;
- `schedule_not_registered`: the job has no schedule on Temporal (or one this project does
  not manage).

`evaluate` is a pure function of rows, schedule states and `now`, so every alert and every DST
case is unit-tested without servers; `run_check` (`schedules.health.check_run`) loads the
inputs from PostgreSQL and Temporal. Fire times are the job's `Timing` (classic cron DST semantics). A fire time
is "covered" by any row scheduled between it and the next fire time, which absorbs jitter,
manual triggers and DST compensation.
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from activities.catchup.backfills import DroppedSlot
from schedules.health.status import (
    COMPENSATED,
    COMPLETED,
    DEFAULT_GRACE,
    DEFAULT_LOOKBACK,
    FAILED,
    HISTORY,
    MAX_FIRES,
    MIN_HISTORY,
    RUNNING,
    SKIPPED,
    SLOW_FACTOR,
    SLOW_MIN_EXCESS,
    Alert,
    CheckReport,
    Execution,
    JobStatus,
    Kind,
    OutboxState,
    ScheduleState,
    iso_word,
    span,
    when,
)
from timing import Timing


def _covered(times: Sequence[datetime], start: datetime, end: datetime | None) -> bool:
    """Whether any of the sorted `times` falls in `[start, end)`."""
    i = bisect.bisect_left(times, start)
    return i < len(times) and (end is None or times[i] < end)


def _median(runs: Sequence[Execution]) -> timedelta:
    return timedelta(seconds=statistics.median(r.duration.total_seconds() for r in runs))


def evaluate_job(
    job: Any,
    executions: Iterable[Execution] | None,
    schedule: ScheduleState | None,
    now: datetime,
    lookback: timedelta = DEFAULT_LOOKBACK,
) -> JobStatus:
    """Judge one job at `now` from its execution rows and its schedule's state.

    `executions`: any superset of the rows `schedules/sql/check.sql` loads (None: the
    database could not be read). `schedule`: None when Temporal could not be asked.
    """
    timing: Timing = job.timing
    grace: timedelta = getattr(job, "alert_grace", DEFAULT_GRACE)
    jitter: timedelta = getattr(job, "jitter", timedelta(0))
    status = JobStatus(
        job=job.id,
        schedule=timing.text,
        timezone=timing.timezone,
        state="unknown",
    )
    alert = status.alerts.append

    expect_runs = not job.paused
    if schedule is not None:
        if not schedule.exists:
            status.state = "not registered"
            alert(
                Alert(
                    Kind.SCHEDULE_NOT_REGISTERED,
                    job.id,
                    f"no Temporal schedule {job.id!r}: nothing will run it; "
                    "run `python -m schedules sync`",
                )
            )
        elif not schedule.managed:
            status.state = "not managed"
            alert(
                Alert(
                    Kind.SCHEDULE_NOT_REGISTERED,
                    job.id,
                    f"the Temporal schedule {job.id!r} is not managed by this project "
                    "(no managed-by memo): rename the job or delete that schedule",
                )
            )
        else:
            status.state = "paused" if schedule.paused else "active"
            expect_runs = expect_runs and not schedule.paused
            if schedule.next_action_times and not schedule.paused:
                status.next_due = min(schedule.next_action_times)
                status.next_due_source = "temporal"
    if job.paused and status.state in ("unknown", "active"):
        status.state = "paused"
    if status.next_due is None and expect_runs and status.state in ("unknown", "active"):
        status.next_due = timing.next_after(now)
        status.next_due_source = "catalog" if status.next_due else None

    if executions is None:
        return status
    rows = sorted((e for e in executions if e.job_name == job.id), key=lambda e: e.scheduled_at)
    runs = [r for r in rows if not r.catchup_gap]
    completed = [r for r in runs if r.status == COMPLETED and r.finished_at is not None]
    status.last_run = runs[-1] if runs else None
    status.last_success = completed[-1] if completed else None
    baseline = completed[-HISTORY:]
    expected = _median(baseline) if baseline else timedelta(0)

    # Fire times are expected from when the schedule's timing took effect, else from the
    # job's first row or its schedule's creation, whichever is older.
    if schedule is not None and schedule.timing_since is not None:
        floor: datetime | None = schedule.timing_since
    else:
        known = [rows[0].scheduled_at] if rows else []
        if schedule is not None and schedule.created_at is not None:
            known.append(schedule.created_at)
        floor = min(known, default=None)

    if expect_runs and floor is not None:
        _not_completed(status, timing, runs, floor, now - grace - jitter - expected, now)
        _missed(status, timing, rows, max(floor, now - lookback), now - grace - jitter)
    _catchup_gaps(status, rows, now - lookback, lookback)
    if schedule is not None and schedule.dropped:
        _backfill_skipped(status, job, schedule.dropped)
    _last_run_failed(status, runs)
    _dependency_overdue(status, runs, now)
    _slow(status, runs, completed, now)
    return status


def _not_completed(
    status: JobStatus,
    timing: Timing,
    runs: list[Execution],
    floor: datetime,
    due_before: datetime,
    now: datetime,
) -> None:
    latest = timing.fire_times(floor, due_before, limit=1, newest=True)
    if not latest:
        return
    fire = latest[0]
    until = timing.next_after(fire)
    first = _first_slot(timing, fire)
    bucket = [
        r for r in runs if r.scheduled_at >= first and (until is None or r.scheduled_at < until)
    ]
    if any(r.status in (COMPLETED, SKIPPED) for r in bucket):
        return
    if bucket and bucket[-1].waiting:
        return  # waiting for its upstreams: `_dependency_overdue` judges it by its deadline
    late = f"{span(now - fire)} after its fire time"
    if not bucket:
        detail = f"no run was recorded for it, {late}"
    else:
        run = bucket[-1]
        if run.status == RUNNING:
            detail = f"its run is still running (attempt {run.attempt}), {late}"
        else:
            detail = f"its run {run.status}, {late}"
    status.alerts.append(
        Alert(Kind.NOT_COMPLETED, status.job, f"fire time {when(fire)} has not completed: {detail}")
    )


def _first_slot(timing: Timing, fire: datetime) -> datetime:
    """The oldest slot a fire time runs: itself, or for a calendar job possibly an earlier
    slot moved onto it (`following`); its runs are recorded from there on."""
    if timing.calendar is None:
        return fire
    return min([fire, *timing.slots_at(fire)])


def _missed(
    status: JobStatus, timing: Timing, rows: list[Execution], start: datetime, end: datetime
) -> None:
    fires = timing.fire_times(start, end, limit=MAX_FIRES, newest=True)
    if not fires:
        return
    times = [r.scheduled_at for r in rows]
    bounds: list[datetime | None] = [*fires[1:], timing.next_after(fires[-1])]
    missed = [
        f
        for f, b in zip(fires, bounds, strict=True)
        if not _covered(times, _first_slot(timing, f), b)
    ]
    if missed:
        shown = ", ".join(when(f) for f in missed[-5:])
        more = f" (newest 5: {shown})" if len(missed) > 5 else f": {shown}"
        status.alerts.append(
            Alert(
                Kind.MISSED_RUNS,
                status.job,
                f"{len(missed)} of {len(fires)} fire times since {when(start)} have no "
                f"execution record{more}",
            )
        )


def _dependency_overdue(status: JobStatus, runs: list[Execution], now: datetime) -> None:
    """Runs still waiting for their upstream slots past their deadline (docs/dependencies.md).
    Within it a wait is normal, and never alerts: a downstream on a fresh stack, or one whose
    upstream is late, is not paged before its `within` has passed."""
    overdue = [
        r for r in runs if r.waiting and r.wait_deadline is not None and r.wait_deadline <= now
    ]
    if overdue:
        run = overdue[-1]
        more = f" ({len(overdue)} runs)" if len(overdue) > 1 else ""
        status.alerts.append(
            Alert(
                Kind.DEPENDENCY_OVERDUE,
                status.job,
                f"the run for {when(run.scheduled_at)} still waits for its upstream slots, "
                f"{span(now - run.wait_deadline)} past its deadline{more}: {run.wait_progress}",
            )
        )


def _catchup_gaps(
    status: JobStatus, rows: list[Execution], since: datetime, lookback: timedelta
) -> None:
    gaps = [r for r in rows if r.catchup_gap and max(r.scheduled_at, r.started_at) >= since]
    if gaps:
        newest = max(gaps, key=lambda r: r.started_at)
        status.alerts.append(
            Alert(
                Kind.CATCHUP_GAP,
                status.job,
                f"{len(gaps)} catch-up gap record(s) in the last {span(lookback)}; newest for "
                f"{when(newest.scheduled_at)}: {newest.error}",
            )
        )


def _backfill_skipped(status: JobStatus, job: Any, dropped: Sequence[DroppedSlot]) -> None:
    first, last = dropped[0].fire, dropped[-1].fire
    shown = ", ".join(when(d.fire) for d in dropped[:5])
    more = f" and {len(dropped) - 5} more" if len(dropped) > 5 else ""
    overlap = dropped[-1].request.overlap or getattr(job, "overlap", "skip")
    status.alerts.append(
        Alert(
            Kind.BACKFILL_SKIPPED,
            status.job,
            f"{len(dropped)} backfilled slot(s) skipped by the server under overlap {overlap} "
            f"and never run: {shown}{more}; run them with `python -m schedules backfill "
            f"{status.job} --start {iso_word(first)} --end {iso_word(last + timedelta(seconds=1))}` "
            "(it buffers every slot), or choose Overlap Policy 'Buffer All' in the UI's dialog",
        )
    )


def _last_run_failed(status: JobStatus, runs: list[Execution]) -> None:
    finished = [r for r in runs if r.status in (COMPLETED, FAILED, COMPENSATED)]
    if finished and finished[-1].status != COMPLETED:
        run = finished[-1]
        error = (run.error or "no error recorded").splitlines()[0][:300]
        how = (
            "failed and was compensated"
            if run.status == COMPENSATED
            else f"failed after {run.attempt} attempt(s)"
        )
        status.alerts.append(
            Alert(
                Kind.LAST_RUN_FAILED,
                status.job,
                f"the run for {when(run.scheduled_at)} {how}: {error}",
            )
        )


def _slow(
    status: JobStatus, runs: list[Execution], completed: list[Execution], now: datetime
) -> None:
    def too_slow(took: timedelta, median: timedelta) -> bool:
        return took > median * SLOW_FACTOR and took - median >= SLOW_MIN_EXCESS

    if len(completed) > MIN_HISTORY:
        latest, before = completed[-1], completed[-HISTORY - 1 : -1]
        median = _median(before)
        if too_slow(latest.duration, median):
            status.alerts.append(
                Alert(
                    Kind.SLOW_RUN,
                    status.job,
                    f"the run for {when(latest.scheduled_at)} took {span(latest.duration)}, "
                    f"over {SLOW_FACTOR:g} x the median {span(median)} of the "
                    f"{len(before)} before it",
                )
            )
            return
    running = [r for r in runs if r.status == RUNNING and not r.waiting]
    baseline = completed[-HISTORY:]
    if running and len(baseline) >= MIN_HISTORY:
        run, median = running[-1], _median(baseline)
        took = now - run.started_at - (run.waited or timedelta(0))  # its work, not its wait
        if too_slow(took, median):
            status.alerts.append(
                Alert(
                    Kind.SLOW_RUN,
                    status.job,
                    f"the run for {when(run.scheduled_at)} has been running for "
                    f"{span(took)}, over {SLOW_FACTOR:g} x the median "
                    f"{span(median)} of the last {len(baseline)} completed runs",
                )
            )


def evaluate_outbox(outbox: OutboxState | None) -> list[Alert]:
    if outbox is None or outbox.dead == 0:
        return []
    return [
        Alert(
            Kind.DEAD_OUTBOX,
            "outbox",
            f"{outbox.dead} outbox message(s) are dead (the relay gave up on them), "
            f"oldest {when(outbox.oldest_dead_at)}, newest {when(outbox.newest_dead_at)}",
        )
    ]


def evaluate(
    jobs: Iterable[Any],
    executions: Iterable[Execution] | None,
    schedules: dict[str, ScheduleState] | None,
    outbox: OutboxState | None,
    now: datetime,
    lookback: timedelta = DEFAULT_LOOKBACK,
    errors: Sequence[str] = (),
) -> CheckReport:
    """The whole report at `now`. None inputs mean that source could not be read."""
    # Each job is judged on its own rows: grouped once, not filtered from all rows per job.
    by_job: dict[str, list[Execution]] | None = None
    if executions is not None:
        by_job = {}
        for row in executions:
            by_job.setdefault(row.job_name, []).append(row)
    return CheckReport(
        checked_at=now,
        jobs=[
            evaluate_job(
                job,
                by_job.get(job.id, []) if by_job is not None else None,
                schedules.get(job.id) if schedules is not None else None,
                now,
                lookback,
            )
            for job in jobs
        ],
        outbox=outbox,
        outbox_alerts=evaluate_outbox(outbox),
        errors=list(errors),
    )
