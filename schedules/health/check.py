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
  run since (`schedules/backfills.py` names them);
- `dead_outbox`: outbox messages the relay gave up on;
- `schedule_not_registered`: the job has no schedule on Temporal (or one this project does
  not manage).

`evaluate` is a pure function of rows, schedule states and `now`, so every alert and every DST
case is unit-tested without servers; `run_check` loads the inputs from PostgreSQL and
Temporal. Fire times are the job's `Timing` (classic cron DST semantics). A fire time
is "covered" by any row scheduled between it and the next fire time, which absorbs jitter,
manual triggers and DST compensation.

The schedules are read from one listing (paged) where it can vouch for them: a schedule
`sync` wrote carries `ScheduledJobsTiming` (since when its timing has been in force, and a
fingerprint of that timing), so a listed managed schedule whose fingerprint matches the
catalog's timing needs no describe. Every other job (not listed yet, not managed, written
by an older sync, its timing pending or changed since) is described, as before. The listing
comes from visibility, which lags the server by about a second: a pause or the next action
time of the last moment may show a moment late; the timing floor never comes from another
timing than the catalog's.
"""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

import psycopg
from psycopg.rows import dict_row
from temporalio.service import RPCError

from core import redact
from core.sql import queries
from schedules.catalog.compile import (
    MANAGED_MEMO_KEY,
    MANAGED_MEMO_VALUE,
    TIMING_ATTRIBUTE,
    read_timing_stamp,
)
from schedules.health.runtime import runtime_alerts
from schedules.server.backfills import DroppedSlot, backfill_requests, dropped_slots
from schedules.server.found import schedule_or_none
from schedules.server.retry import transport_cause
from timing import Timing
from worker.client import connect
from workflows import JobRun

DEFAULT_GRACE = timedelta(minutes=15)
DEFAULT_LOOKBACK = timedelta(hours=24)
# Duration baseline: the completed runs before the one judged.
HISTORY = 20
MIN_HISTORY = 5
SLOW_FACTOR = 1.5
# Seconds-long jobs vary by more than 50% for no reason anyone should be paged about.
SLOW_MIN_EXCESS = timedelta(minutes=1)
# Fire times examined per job: bounds the work for a job that fires every few seconds.
MAX_FIRES = 1000
CATCHUP_GAP_PREFIX = "catch-up gap"
# A recent action started this long after its slot came from a backfill (or a catch-up).
BACKFILL_LATENESS = timedelta(minutes=5)

COMPLETED, FAILED, SKIPPED, RUNNING = "completed", "failed", "skipped", "running"
COMPENSATED = "compensated"  # a workflow job's run that failed and undid its steps


class Kind(StrEnum):
    NOT_COMPLETED = "not_completed"
    LAST_RUN_FAILED = "last_run_failed"
    MISSED_RUNS = "missed_runs"
    CATCHUP_GAP = "catchup_gap"
    SLOW_RUN = "slow_run"
    BACKFILL_SKIPPED = "backfill_skipped"
    DEAD_OUTBOX = "dead_outbox"
    SCHEDULE_NOT_REGISTERED = "schedule_not_registered"


@dataclass(frozen=True)
class Execution:
    """One `job_executions` row, as much of it as the check reads."""

    job_name: str
    scheduled_at: datetime
    status: str
    started_at: datetime
    finished_at: datetime | None = None
    error: str | None = None
    attempt: int = 0

    @property
    def duration(self) -> timedelta | None:
        return self.finished_at - self.started_at if self.finished_at else None

    @property
    def catchup_gap(self) -> bool:
        return self.status == SKIPPED and (self.error or "").startswith(CATCHUP_GAP_PREFIX)


@dataclass(frozen=True)
class ScheduleState:
    """What Temporal says about a job's schedule."""

    exists: bool
    managed: bool = True
    paused: bool = False
    next_action_times: tuple[datetime, ...] = ()
    created_at: datetime | None = None
    # Since when the schedule's current timing has been in force (set by `sync`).
    timing_since: datetime | None = None
    # A sign that a backfill may have dropped slots: the server's skipped-overlap count
    # (described schedules) or a recent action started long after its slot (listed ones).
    backfilled: bool = False
    # The slots of the schedule's recent actions: started, if not recorded yet.
    started: tuple[datetime, ...] = ()
    # Backfilled slots the server skipped and nothing ran since (filled by `run_check`).
    dropped: tuple[DroppedSlot, ...] = ()


@dataclass(frozen=True)
class OutboxState:
    dead: int
    oldest_dead_at: datetime | None = None
    newest_dead_at: datetime | None = None


@dataclass(frozen=True)
class Alert:
    kind: Kind
    job: str  # a job id, or "outbox"
    message: str


@dataclass
class JobStatus:
    job: str
    schedule: str  # the cron text or "every <interval>"
    timezone: str
    state: str  # active | paused | not registered | not managed | unknown
    last_run: Execution | None = None
    last_success: Execution | None = None
    next_due: datetime | None = None
    next_due_source: str | None = None  # temporal | catalog
    alerts: list[Alert] = field(default_factory=list)


@dataclass
class CheckReport:
    checked_at: datetime
    jobs: list[JobStatus]
    outbox: OutboxState | None
    outbox_alerts: list[Alert] = field(default_factory=list)
    runtime_alerts: list[Alert] = field(default_factory=list)  # by kind (`health.runtime`)
    # Why the check cannot tell (a server it could not reach); any makes the status unknown.
    errors: list[str] = field(default_factory=list)

    @property
    def alerts(self) -> list[Alert]:
        return (
            [a for job in self.jobs for a in job.alerts] + self.outbox_alerts + self.runtime_alerts
        )

    @property
    def status(self) -> str:
        return "unknown" if self.errors else "alert" if self.alerts else "ok"

    @property
    def exit_code(self) -> int:
        return {"ok": 0, "alert": 1, "unknown": 2}[self.status]


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%SZ") if value else "-"


def _span(value: timedelta) -> str:
    seconds = int(value.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


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
    bucket = [
        r for r in runs if r.scheduled_at >= fire and (until is None or r.scheduled_at < until)
    ]
    if any(r.status in (COMPLETED, SKIPPED) for r in bucket):
        return
    late = f"{_span(now - fire)} after its fire time"
    if not bucket:
        detail = f"no run was recorded for it, {late}"
    else:
        run = bucket[-1]
        if run.status == RUNNING:
            detail = f"its run is still running (attempt {run.attempt}), {late}"
        else:
            detail = f"its run {run.status}, {late}"
    status.alerts.append(
        Alert(
            Kind.NOT_COMPLETED, status.job, f"fire time {_when(fire)} has not completed: {detail}"
        )
    )


def _missed(
    status: JobStatus, timing: Timing, rows: list[Execution], start: datetime, end: datetime
) -> None:
    fires = timing.fire_times(start, end, limit=MAX_FIRES, newest=True)
    if not fires:
        return
    times = [r.scheduled_at for r in rows]
    bounds: list[datetime | None] = [*fires[1:], timing.next_after(fires[-1])]
    missed = [f for f, b in zip(fires, bounds, strict=True) if not _covered(times, f, b)]
    if missed:
        shown = ", ".join(_when(f) for f in missed[-5:])
        more = f" (newest 5: {shown})" if len(missed) > 5 else f": {shown}"
        status.alerts.append(
            Alert(
                Kind.MISSED_RUNS,
                status.job,
                f"{len(missed)} of {len(fires)} fire times since {_when(start)} have no "
                f"execution record{more}",
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
                f"{len(gaps)} catch-up gap record(s) in the last {_span(lookback)}; newest for "
                f"{_when(newest.scheduled_at)}: {newest.error}",
            )
        )


def _backfill_skipped(status: JobStatus, job: Any, dropped: Sequence[DroppedSlot]) -> None:
    first, last = dropped[0].fire, dropped[-1].fire
    shown = ", ".join(_when(d.fire) for d in dropped[:5])
    more = f" and {len(dropped) - 5} more" if len(dropped) > 5 else ""
    overlap = dropped[-1].request.overlap or getattr(job, "overlap", "skip")
    status.alerts.append(
        Alert(
            Kind.BACKFILL_SKIPPED,
            status.job,
            f"{len(dropped)} backfilled slot(s) skipped by the server under overlap {overlap} "
            f"and never run: {shown}{more}; run them with `python -m schedules backfill "
            f"{status.job} --start {_when(first)} --end {_when(last + timedelta(seconds=1))}` "
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
                f"the run for {_when(run.scheduled_at)} {how}: {error}",
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
                    f"the run for {_when(latest.scheduled_at)} took {_span(latest.duration)}, "
                    f"over {SLOW_FACTOR:g} x the median {_span(median)} of the "
                    f"{len(before)} before it",
                )
            )
            return
    running = [r for r in runs if r.status == RUNNING]
    baseline = completed[-HISTORY:]
    if running and len(baseline) >= MIN_HISTORY:
        run, median = running[-1], _median(baseline)
        if too_slow(now - run.started_at, median):
            status.alerts.append(
                Alert(
                    Kind.SLOW_RUN,
                    status.job,
                    f"the run for {_when(run.scheduled_at)} has been running for "
                    f"{_span(now - run.started_at)}, over {SLOW_FACTOR:g} x the median "
                    f"{_span(median)} of the last {len(baseline)} completed runs",
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
            f"oldest {_when(outbox.oldest_dead_at)}, newest {_when(outbox.newest_dead_at)}",
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


# --- loading -------------------------------------------------------------------------------


async def load_database(
    conninfo: str, job_ids: Sequence[str], now: datetime, lookback: timedelta, timeout: float
) -> tuple[list[Execution], OutboxState]:
    """Read the rows `evaluate` needs and the dead outbox count, in a read-only session."""
    q = queries("schedules.sql", "check")
    async with await psycopg.AsyncConnection.connect(
        conninfo, connect_timeout=max(2, int(timeout)), row_factory=dict_row
    ) as conn:
        await conn.set_read_only(True)  # one READ ONLY transaction, committed on exit
        cur = await conn.execute(
            q["executions"],
            {
                "jobs": list(job_ids),
                "since": now - lookback,
                "max_rows": MAX_FIRES * 2,
                "history": HISTORY + 1,
                "gap_pattern": CATCHUP_GAP_PREFIX + "%",
            },
        )
        rows = [Execution(**row) for row in await cur.fetchall()]
        dead = await (await conn.execute(q["dead_outbox"])).fetchone()
    return rows, OutboxState(dead["dead"], dead["oldest"], dead["newest"])


async def load_schedules(
    client: Any, jobs: Sequence[Any], timeout: float | None = None
) -> dict[str, ScheduleState]:
    """Each job's schedule state: from the listing where it vouches for it, else described;
    each call to the server within `timeout`."""
    listed = await listed_states(client, jobs, timeout)
    described = await describe_states(client, [j.id for j in jobs if j.id not in listed], timeout)
    return {job.id: listed.get(job.id) or described[job.id] for job in jobs}


async def listed_states(
    client: Any, jobs: Sequence[Any], timeout: float | None = None
) -> dict[str, ScheduleState]:
    """The states the schedule listing vouches for: managed schedules whose
    `ScheduledJobsTiming` was written for the timing the catalog has now."""
    by_id = {job.id: job for job in jobs}
    found: dict[str, ScheduleState] = {}
    entries = (await client.list_schedules()).__aiter__()
    while True:
        async with asyncio.timeout(timeout):  # each page, not the whole listing
            try:
                entry = await anext(entries)
            except StopAsyncIteration:
                break
        job = by_id.get(entry.id)
        if job is None or entry.schedule is None or entry.info is None:
            continue
        if await entry.memo_value(MANAGED_MEMO_KEY, default=None) != MANAGED_MEMO_VALUE:
            continue
        since = read_timing_stamp(entry.typed_search_attributes.get(TIMING_ATTRIBUTE), job)
        if since is None:
            continue
        found[job.id] = ScheduleState(
            exists=True,
            managed=True,
            paused=entry.schedule.state.paused,
            next_action_times=tuple(entry.info.next_action_times),
            timing_since=since,
            backfilled=any(
                a.started_at - a.scheduled_at > BACKFILL_LATENESS for a in entry.info.recent_actions
            ),
            started=tuple(a.scheduled_at for a in entry.info.recent_actions),
        )
    return found


async def describe_states(
    client: Any, job_ids: Sequence[str], timeout: float | None = None
) -> dict[str, ScheduleState]:
    """Describe each job's schedule, each call within `timeout`; a missing one is
    `ScheduleState(exists=False)`."""
    limit = asyncio.Semaphore(16)

    async def one(job_id: str) -> ScheduleState:
        async with limit, asyncio.timeout(timeout):
            described = await schedule_or_none(client, job_id)
        if described is None:
            return ScheduleState(exists=False)
        managed = await described.memo_value(MANAGED_MEMO_KEY, default=None) == MANAGED_MEMO_VALUE
        timing_since = None
        args = getattr(described.schedule.action, "args", None)
        if managed and args:
            try:
                (run,) = await client.data_converter.decode(args, [JobRun])
                timing_since = getattr(run, "timing_since", None)
                if run.timing_pending:  # not stamped yet: in force since the last write
                    info = described.info
                    timing_since = info.last_updated_at or info.created_at
            except Exception:  # an older payload without it: fall back to the rows
                timing_since = None
        return ScheduleState(
            exists=True,
            managed=managed,
            paused=described.schedule.state.paused,
            next_action_times=tuple(described.info.next_action_times),
            created_at=described.info.created_at,
            timing_since=timing_since,
            backfilled=described.info.num_actions_skipped_overlap > 0,
            started=tuple(a.scheduled_at for a in described.info.recent_actions),
        )

    states = await asyncio.gather(*(one(job_id) for job_id in job_ids))
    return dict(zip(job_ids, states, strict=True))


async def with_dropped_slots(
    client: Any,
    settings: Any,
    jobs: Sequence[Any],
    states: dict[str, ScheduleState],
    since: datetime,
    timeout: float | None = None,
) -> dict[str, ScheduleState]:
    """`states`, each job that shows a sign of a backfill given the backfilled slots the
    server skipped (requested since `since`) that have no ledger row."""
    conninfo = settings.database_url.get_secret_value()
    recorded_q = queries("schedules.sql", "check")["recorded_in_range"]
    limit = asyncio.Semaphore(8)

    async def one(job: Any) -> tuple[str, tuple[DroppedSlot, ...]]:
        try:
            return job.id, await dropped_of(job)
        except (psycopg.Error, OSError):  # the database's own read reports it
            return job.id, ()

    async def dropped_of(job: Any) -> tuple[DroppedSlot, ...]:
        async with limit, asyncio.timeout(timeout):
            requests = [
                r for r in await backfill_requests(client, job.id) if r.requested_at >= since
            ]
            if not requests:
                return ()
            start, end = min(r.start for r in requests), max(r.end for r in requests)
            async with await psycopg.AsyncConnection.connect(
                conninfo, connect_timeout=max(2, int(timeout or 10))
            ) as conn:
                cur = await conn.execute(recorded_q, {"job": job.id, "start": start, "end": end})
                recorded = [row[0] for row in await cur.fetchall()]
        recorded += states[job.id].started
        return tuple(dropped_slots(job.timing, requests, recorded, getattr(job, "overlap", "skip")))

    hinted = [job for job in jobs if job.id in states and states[job.id].backfilled]
    for job_id, dropped in await asyncio.gather(*(one(job) for job in hinted)):
        if dropped:
            states[job_id] = dataclasses.replace(states[job_id], dropped=dropped)
    return states


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


async def run_check(
    settings: Any,
    jobs: Sequence[Any],
    now: datetime,
    lookback: timedelta = DEFAULT_LOOKBACK,
    timeout: float = 10.0,
) -> CheckReport:
    """Load from PostgreSQL and Temporal at once, then `evaluate`. `timeout` bounds the
    database read, connecting to Temporal and each call to it (one per job).

    A source that cannot be read becomes an entry in `errors` (status unknown, exit 2);
    the rest is still evaluated and reported.
    """
    job_ids = [job.id for job in jobs]

    async def database() -> tuple[list[Execution], OutboxState]:
        async with asyncio.timeout(timeout):
            return await load_database(
                settings.database_url.get_secret_value(), job_ids, now, lookback, timeout
            )

    async def temporal() -> dict[str, ScheduleState]:
        # Each call is bounded, not the pass: describing 10,000 schedules takes far longer
        # than a server that does not answer may keep the check waiting.
        async with asyncio.timeout(timeout):
            client = await connect(settings)
        states = await load_schedules(client, jobs, timeout)
        return await with_dropped_slots(client, settings, jobs, states, now - lookback, timeout)

    async def runtime() -> list[Alert]:
        async with asyncio.timeout(timeout):
            found = await runtime_alerts(
                settings.database_url.get_secret_value(), now, lookback, timeout
            )
        return [Alert(Kind(kind), subject, message) for kind, subject, message in found]

    db, tp, rt = await asyncio.gather(database(), temporal(), runtime(), return_exceptions=True)
    errors = []
    executions: list[Execution] | None = None
    outbox: OutboxState | None = None
    if isinstance(db, BaseException):
        if not isinstance(db, psycopg.Error | OSError | TimeoutError):
            raise db
        why = "timed out" if isinstance(db, TimeoutError) else _first_line(db)
        errors.append(redact.scrub(f"cannot read the database: {why}"))
    else:
        executions, outbox = db
    schedules: dict[str, ScheduleState] | None = None
    if isinstance(tp, BaseException):
        if not isinstance(tp, RPCError | RuntimeError | OSError | TimeoutError):
            raise tp  # a bug, not an unreachable server
        why = f"no answer within {timeout:g}s" if isinstance(tp, TimeoutError) else None
        why = why or (transport_cause(tp) if isinstance(tp, RuntimeError) else _first_line(tp))
        errors.append(redact.scrub(f"cannot reach Temporal at {settings.temporal_address}: {why}"))
    else:
        schedules = tp
    report = evaluate(jobs, executions, schedules, outbox, now, lookback, errors)
    if not isinstance(rt, BaseException):
        report.runtime_alerts = rt
    elif not isinstance(rt, psycopg.Error | OSError | TimeoutError):
        raise rt
    return report
