"""The audit's inputs, read once: the ledger, journal and outbox by time window, and
Temporal's visibility (each job's runs by scheduled time) at a bounded rate.

Everything is read-only: one READ ONLY transaction in PostgreSQL; list and describe calls
to Temporal, at most `pages_per_second` listing pages (of 1,000 runs) a second.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any

import psycopg
from psycopg.rows import dict_row, namedtuple_row
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from core.sql import queries

_Q = queries("schedules.sql", "audit")
PAGE_SIZE = 1000
UNDELIVERED_LIMIT = 1000


@dataclass(frozen=True)
class Window:
    """Scheduled times [start, end) under audit, as of `now`."""

    start: datetime
    end: datetime
    now: datetime
    settle: timedelta
    late: timedelta
    outbox_age: timedelta


@dataclass(frozen=True)
class Run:
    """One closed or open run of a job's workflow, as Temporal's visibility lists it."""

    workflow_id: str
    run_id: str
    status: str  # WorkflowExecutionStatus name: RUNNING, COMPLETED, FAILED, TERMINATED...
    slot: datetime | None
    started: datetime | None = None  # when Temporal started the run


@dataclass
class Ledger:
    """What PostgreSQL holds for the window."""

    rows: dict[str, dict[datetime, Any]]  # job -> slot -> row (namedtuple)
    bounds: dict[str, tuple[datetime, datetime]]  # job -> (first, last recorded slot)
    stale_writes: list[dict]
    outbox_duplicates: list[dict]
    failed_effects: list[dict]
    undelivered: list[dict]
    domain: list[dict]  # rows of the kinds' audit_effects queries, with their job
    # job -> recorded pauses (paused_at, resumed_at or None: still paused), oldest first
    pauses: dict[str, list[tuple[datetime, datetime | None]]] = field(default_factory=dict)
    # job -> slot a recorded backfill asked for -> that request (id, requested_at)
    asked: dict[str, dict[datetime, dict]] = field(default_factory=dict)

    @property
    def by_id(self) -> dict[int, Any]:
        return {row.id: row for rows in self.rows.values() for row in rows.values()}

    def running(self) -> list[tuple[str, str]]:
        """(workflow id, run id) of each row still `running`: the runs to ask Temporal about."""
        return [
            (row.workflow_id, row.run_id)
            for rows in self.rows.values()
            for row in rows.values()
            if row.status == "running" and row.workflow_id and row.run_id
        ]


@dataclass
class Visibility:
    """What Temporal holds: each job's runs in the window, the namespace's retention, and
    the runs described one by one (None: not found): those of rows still `running`, and
    every run the listing shows RUNNING (visibility lags: it may have closed since)."""

    runs: dict[str, list[Run]] = field(default_factory=dict)
    retention: timedelta | None = None
    running: dict[tuple[str, str], str | None] = field(default_factory=dict)

    def status(self, workflow_id: str, run_id: str) -> str | None:
        """The run's status as last learnt: described, else listed (None: unknown)."""
        key = (workflow_id, run_id)
        if key in self.running:
            return self.running[key]
        return self._listed.get(key)

    @cached_property
    def _listed(self) -> dict[tuple[str, str], str]:
        """Each listed run's status by (workflow id, run id), once the listing is read."""
        return {(r.workflow_id, r.run_id): r.status for runs in self.runs.values() for r in runs}


def _domain_query(kind_name: str) -> str | None:
    """A kind's own query for its domain effects: `audit_effects` in its package's
    `queries.sql`, if it has one (the registration is the query's presence)."""
    from jobs import kinds  # the job packages, found by looking

    kind = kinds().get(kind_name)
    if kind is None or kind.owner is None:
        return None
    package = kind.owner.__module__.rpartition(".")[0]
    try:
        return queries(package, "queries").get("audit_effects")
    except (FileNotFoundError, ModuleNotFoundError):
        return None


def _slot_params(jobs: Sequence[str], window: Window) -> dict[str, Any]:
    return {"jobs": list(jobs), "from": window.start, "to": window.end}


async def read_ledger(
    conninfo: str, jobs: Sequence[Any], window: Window, *, only_jobs: bool, timeout: float
) -> Ledger:
    """Read the window's rows, journal findings and outbox state in one read-only session."""
    ids = [job.id for job in jobs]
    params = _slot_params(ids, window)
    async with await psycopg.AsyncConnection.connect(
        conninfo, connect_timeout=max(2, int(timeout))
    ) as conn:
        await conn.set_read_only(True)
        rows: dict[str, dict[datetime, Any]] = {job_id: {} for job_id in ids}
        cur = conn.cursor(row_factory=namedtuple_row)
        await cur.execute(_Q["executions"], params)
        for row in await cur.fetchall():
            rows[row.job_name][row.scheduled_at] = row
        dicts = conn.cursor(row_factory=dict_row)

        async def all_of(query: str, extra: dict | None = None) -> list[dict]:
            await dicts.execute(query, params | (extra or {}))
            return await dicts.fetchall()

        bounds = {
            r["job_name"]: (r["first_slot"], r["last_slot"]) for r in await all_of(_Q["bounds"])
        }
        undelivered = await all_of(
            _Q["outbox_undelivered"],
            {
                "pending_before": window.now - window.outbox_age,
                "only_jobs": only_jobs,
                "limit": UNDELIVERED_LIMIT,
            },
        )
        domain = []
        for kind in sorted({job.kind for job in jobs}):
            query = _domain_query(kind)
            if query is not None:
                of_kind = [job.id for job in jobs if job.kind == kind]
                domain += await all_of(query, {"jobs": of_kind})
        pauses: dict[str, list[tuple[datetime, datetime | None]]] = {}
        for p in await all_of(_Q["pauses"]):
            pauses.setdefault(p["job_name"], []).append((p["paused_at"], p["resumed_at"]))
        asked: dict[str, dict[datetime, dict]] = {}
        for b in await all_of(_Q["backfills"], {"settled": window.now - window.settle}):
            asked.setdefault(b["job_name"], {})[b["slot"]] = b
        return Ledger(
            pauses=pauses,
            asked=asked,
            rows=rows,
            bounds=bounds,
            stale_writes=await all_of(_Q["stale_writes"]),
            outbox_duplicates=await all_of(_Q["outbox_duplicates"]),
            failed_effects=await all_of(_Q["failed_effects"]),
            undelivered=undelivered,
            domain=domain,
        )


async def recheck(
    conninfo: str, pairs: Sequence[tuple[str, datetime]], timeout: float
) -> dict[tuple[str, datetime], str]:
    """The status now of the rows of these (job, slot) pairs (absent: no row)."""
    if not pairs:
        return {}
    async with await psycopg.AsyncConnection.connect(
        conninfo, connect_timeout=max(2, int(timeout))
    ) as conn:
        await conn.set_read_only(True)
        cur = await conn.execute(
            _Q["recheck"], {"jobs": [p[0] for p in pairs], "slots": [p[1] for p in pairs]}
        )
        return {(job, slot): status for job, slot, status in await cur.fetchall()}


def _iso(instant: datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def slot_of(job_id: str, workflow_id: str) -> datetime | None:
    """The scheduled time in a schedule-started run's id, `<job>-<UTC time>Z`."""
    stamp = workflow_id.removeprefix(f"{job_id}-")
    try:
        return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None


class _Rate:
    """At most `per_second` calls a second (a pause before a call that would exceed it)."""

    def __init__(self, per_second: float) -> None:
        self.every = 1.0 / per_second
        self.next = 0.0

    async def wait(self) -> None:
        now = time.monotonic()
        if now < self.next:
            await asyncio.sleep(self.next - now)
        self.next = max(now, self.next) + self.every


async def list_runs(
    client: Client, job_id: str, task_queue: str, window: Window, rate: _Rate, timeout: float
) -> list[Run]:
    """The runs the job's schedule started on the fleet's task queue for slots in the window
    (trigger and backfill included), from visibility: one listing page per `rate` tick."""
    query = (
        f"TemporalScheduledById = '{job_id}' AND TaskQueue = '{task_queue}' "
        f"AND TemporalScheduledStartTime >= '{_iso(window.start)}' "
        f"AND TemporalScheduledStartTime < '{_iso(window.end)}'"
    )
    pages = client.list_workflows(query, page_size=PAGE_SIZE)
    runs = []
    while True:
        await rate.wait()
        async with asyncio.timeout(timeout):
            await pages.fetch_next_page()
        for ex in pages.current_page or ():
            status = ex.status.name if ex.status is not None else "UNKNOWN"
            runs.append(Run(ex.id, ex.run_id, status, slot_of(job_id, ex.id), ex.start_time))
        if not pages.next_page_token:
            return runs


async def _retention(client: Client, timeout: float) -> timedelta | None:
    request = DescribeNamespaceRequest(namespace=client.namespace)
    async with asyncio.timeout(timeout):
        described = await client.workflow_service.describe_namespace(request)
    ttl = described.config.workflow_execution_retention_ttl
    return ttl.ToTimedelta() if ttl.ByteSize() else None


async def describe_run(client: Client, workflow_id: str, run_id: str, timeout: float) -> str | None:
    """A run's status name, or None if Temporal no longer has it."""
    try:
        async with asyncio.timeout(timeout):
            described = await client.get_workflow_handle(workflow_id, run_id=run_id).describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    status = described.status or WorkflowExecutionStatus.RUNNING
    return status.name


async def read_visibility(
    client: Client,
    queues: Mapping[str, str],
    window: Window,
    running: Sequence[tuple[str, str]],
    *,
    pages_per_second: float,
    timeout: float,
) -> Visibility:
    """Each job's runs in the window (`queues`: each job id's task queue), the retention,
    and the state of `running` rows' runs and of the runs listed RUNNING."""
    rate = _Rate(pages_per_second)
    seen = Visibility(retention=await _retention(client, timeout))
    for job_id, task_queue in queues.items():
        seen.runs[job_id] = await list_runs(client, job_id, task_queue, window, rate, timeout)
    in_flight = [key for key, status in seen._listed.items() if status == "RUNNING"]
    await describe_running(client, seen, [*running, *in_flight], rate, timeout)
    return seen


async def describe_running(
    client: Client,
    seen: Visibility,
    runs: Sequence[tuple[str, str]],
    rate: _Rate,
    timeout: float,
) -> None:
    """The state of each of `runs` (workflow id, run id), into `seen.running`, once its
    runs are listed: a closed status in the listing is final; RUNNING there may be stale
    (visibility lags the run's history), so the run itself is asked."""
    listed = seen._listed
    for key in dict.fromkeys(runs):
        if listed.get(key, "RUNNING") != "RUNNING":
            seen.running[key] = listed[key]
        else:
            await rate.wait()
            seen.running[key] = await describe_run(client, *key, timeout)
