"""`run_check`: read what `check` judges from PostgreSQL and Temporal at once, then evaluate.

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
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row
from temporalio.client import Client
from temporalio.service import RPCError

from activities.catchup.backfills import DroppedSlot, backfill_requests, dropped_slots
from core import redact
from core.aio import gather_by
from core.errors import first_line, transport_cause
from core.sql import queries
from schedules.catalog.compile import (
    MANAGED_MEMO_KEY,
    MANAGED_MEMO_VALUE,
    TIMING_ATTRIBUTE,
    read_timing_stamp,
)
from schedules.health.check import evaluate
from schedules.health.runtime import runtime_alerts_with_examples
from schedules.health.status import (
    BACKFILL_LATENESS,
    CATCHUP_GAP_PREFIX,
    DEFAULT_LOOKBACK,
    HISTORY,
    MAX_FIRES,
    Alert,
    CheckReport,
    Execution,
    Kind,
    OutboxState,
    ScheduleState,
)
from schedules.server.found import schedule_or_none
from workflows import JobRun


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

    async def one(job_id: str) -> ScheduleState:
        async with asyncio.timeout(timeout):
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

    return await gather_by(job_ids, one, limit=16)


async def with_dropped_slots(
    client: Any,
    conninfo: str,
    jobs: Sequence[Any],
    states: dict[str, ScheduleState],
    since: datetime,
    timeout: float | None = None,
) -> dict[str, ScheduleState]:
    """`states`, each job that shows a sign of a backfill given the backfilled slots the
    server skipped (requested since `since`) that have no ledger row."""
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


async def run_check(
    client: Client | Callable[[], Awaitable[Client]],
    conninfo: str,
    jobs: Sequence[Any],
    now: datetime,
    lookback: timedelta = DEFAULT_LOOKBACK,
    timeout: float = 10.0,
    *,
    address: str = "the server",
) -> CheckReport:
    """Load from PostgreSQL and Temporal at once, then `evaluate`. `timeout` bounds the
    database read, connecting to Temporal and each call to it (one per job).

    `client` may be a coroutine function that connects (within `timeout`, while the
    database is read); `address` names the server in the error if it cannot be reached.
    A source that cannot be read becomes an entry in `errors` (status unknown, exit 2);
    the rest is still evaluated and reported.
    """
    job_ids = [job.id for job in jobs]

    async def database() -> tuple[list[Execution], OutboxState]:
        async with asyncio.timeout(timeout):
            return await load_database(conninfo, job_ids, now, lookback, timeout)

    async def temporal() -> dict[str, ScheduleState]:
        # Each call is bounded, not the pass: describing 10,000 schedules takes far longer
        # than a server that does not answer may keep the check waiting.
        connected = client
        if not isinstance(connected, Client):
            async with asyncio.timeout(timeout):
                connected = await connected()
        states = await load_schedules(connected, jobs, timeout)
        return await with_dropped_slots(connected, conninfo, jobs, states, now - lookback, timeout)

    async def runtime() -> list[Alert]:
        async with asyncio.timeout(timeout):
            found = await runtime_alerts_with_examples(conninfo, now, lookback, timeout)
        return [Alert(Kind(a.kind), a.subject, a.message, a.examples) for a in found]

    db, tp, rt = await asyncio.gather(database(), temporal(), runtime(), return_exceptions=True)
    errors = []
    executions: list[Execution] | None = None
    outbox: OutboxState | None = None
    if isinstance(db, BaseException):
        if not isinstance(db, psycopg.Error | OSError | TimeoutError):
            raise db
        why = "timed out" if isinstance(db, TimeoutError) else first_line(db)
        errors.append(redact.scrub(f"cannot read the database: {why}"))
    else:
        executions, outbox = db
    schedules: dict[str, ScheduleState] | None = None
    if isinstance(tp, BaseException):
        if not isinstance(tp, RPCError | RuntimeError | OSError | TimeoutError):
            raise tp  # a bug, not an unreachable server
        why = f"no answer within {timeout:g}s" if isinstance(tp, TimeoutError) else None
        why = why or (transport_cause(tp) if isinstance(tp, RuntimeError) else first_line(tp))
        errors.append(redact.scrub(f"cannot reach Temporal at {address}: {why}"))
    else:
        schedules = tp
    report = evaluate(jobs, executions, schedules, outbox, now, lookback, errors)
    if not isinstance(rt, BaseException):
        report.runtime_alerts = rt
    elif not isinstance(rt, psycopg.Error | OSError | TimeoutError):
        raise rt
    return report
