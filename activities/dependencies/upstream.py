"""The activities of a slot's wait for its upstreams (docs/dependencies.md).

- `check_upstream` (a local activity, in the waiting run's own worker): resolve each
  upstream, map its slots onto ours, read their ledger rows, judge (`activities.
  dependencies.judge`), and record the wait (`dependency_waits`) with, for a `skip`
  decision, our slot skipped, in one transaction. The run calls it when it begins to wait,
  when an upstream slot settles (a signal) and at each deadline, and shows its progress.
- `await_upstream` (an ordinary activity): the same check, which **fails** with
  `UpstreamNotReady` while the upstreams are not ready; the run schedules it with a fixed
  retry interval and no end. Between attempts Temporal's server holds the retry timer: no
  worker slot is held while waiting, only for the milliseconds of each check.
- `cancel_wait` (local): an operator cancelled the waiting run; the slot is recorded failed.

An upstream is a catalog job (its timing and `since` read from its Temporal schedule, the
truth of what fires) or a runtime schedule of the same tenant (its row).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from psycopg import AsyncConnection
from psycopg.rows import class_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory
from temporalio.service import RPCError, RPCStatusCode

from activities.claim.executions import Clock, utcnow
from activities.common.dependency_models import (
    NOT_READY,
    UPSTREAM_SETTLED_SIGNAL,
    Dependency,
    UpstreamProgress,
    WaitInput,
    WaitResult,
)
from activities.dependencies.judge import judge, missing, progress, upstream_slots
from activities.runtime.dispatch import calendar_rule
from activities.runtime.models import ScheduleRow, ledger_name
from core.sql import queries
from timing import Timing

_Q = queries("activities.dependencies", "dependencies")

WAIT_STATUS = {"ready": "ready", "waiting": "waiting", "skip": "skipped", "run": "run_anyway"}


class Upstream(BaseModel):
    """An upstream as found: its ledger name, timing and since when it is due."""

    ledger: str
    timing: Timing
    since: datetime | None = None


class CancelInput(BaseModel):
    execution_id: int
    run_id: str
    reason: str


async def catalog_upstream(client: Client, job_id: str) -> Upstream | str:
    """A catalog job's timing and `timing_since`, from its Temporal schedule's run input
    (what sync wrote), or why it cannot be found."""
    try:
        described = await client.get_schedule_handle(job_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return f"no Temporal schedule {job_id!r}"
        raise
    args = getattr(described.schedule.action, "args", None)
    if not args:
        return f"the schedule {job_id!r} starts no run this project can read"
    (run,) = client.data_converter.payload_converter.from_payloads(list(args), [dict])
    if not isinstance(run, dict) or run.get("timing") is None:
        return f"the schedule {job_id!r} was written by an older sync: run `schedules sync`"
    since = run.get("timing_since")
    if run.get("timing_pending") or since is None:
        since = described.info.last_updated_at or described.info.created_at
    else:
        since = datetime.fromisoformat(since)
    return Upstream(ledger=job_id, timing=Timing.model_validate(run["timing"]), since=since)


@dataclass
class UpstreamActivities:
    """`check_upstream`, `await_upstream`, `cancel_wait`; built by the worker with its pool
    (`clock`: the time the deadlines are judged at outside an activity, for the tests)."""

    pool: AsyncConnectionPool
    clock: Clock = utcnow

    @activity.defn
    async def check_upstream(self, wait: WaitInput) -> WaitResult:
        """One check of the wait, recorded (see the module)."""
        return await self._check(wait)

    @activity.defn
    async def await_upstream(self, wait: WaitInput) -> WaitResult:
        """The check, failing `UpstreamNotReady` while waiting: retried by Temporal on a
        fixed interval, holding no worker slot between attempts."""
        result = await self._check(wait)
        if result.state == "waiting":
            raise ApplicationError(
                f"not ready: {result.progress}",
                type=NOT_READY,
                category=ApplicationErrorCategory.BENIGN,  # expected: logged at DEBUG
            )
        return result

    @activity.defn
    async def cancel_wait(self, cancel: CancelInput) -> None:
        """Record the cancelled wait and fail its slot (a backfill runs it again)."""
        async with self.pool.connection() as conn:
            await conn.execute(
                _Q["cancel_wait"],
                {"id": cancel.execution_id, "run_id": cancel.run_id, "reason": cancel.reason},
            )

    def _now(self, wait: WaitInput) -> datetime:
        """The server's time of this check, never this worker's wall clock (a skewed one
        would skip a slot before its deadline, or after it): a check's is the workflow's
        clock it carries, a poll's the server's start of its attempt (each retry anew).
        `clock` only for a caller outside a workflow (tests)."""
        if not activity.in_activity():
            return self.clock()
        info = activity.info()
        if info.is_local:
            return wait.checked_at or self.clock()
        return info.started_time

    async def _check(self, wait: WaitInput) -> WaitResult:
        now = self._now(wait)
        async with self.pool.connection() as conn:
            found = [await self._progress(conn, wait, dep) for dep in wait.depends_on]
            result = judge(wait, found, now)
            async with conn.transaction():
                await self._record(conn, wait, result, now)
                if result.state == "skip":
                    await conn.execute(
                        _Q["skip_slot"],
                        {"id": wait.execution_id, "run_id": wait.run_id, "reason": result.reason},
                    )
        return result

    async def _progress(
        self, conn: AsyncConnection, wait: WaitInput, dep: Dependency
    ) -> UpstreamProgress:
        upstream = await self._resolve(conn, wait, dep)
        if isinstance(upstream, str):
            return missing(dep, upstream)
        mapped = upstream_slots(
            dep.slots, wait.timing, wait.scheduled_at, upstream.timing, upstream.since
        )
        rows: dict[datetime, tuple[str, str | None]] = {}
        if mapped:
            cur = await conn.execute(_Q["upstream_rows"], {"job": upstream.ledger, "slots": mapped})
            rows = {slot: (status, error) for slot, status, error in await cur.fetchall()}
        return progress(dep, upstream.ledger, upstream.timing.timezone, mapped, rows)

    async def _resolve(
        self, conn: AsyncConnection, wait: WaitInput, dep: Dependency
    ) -> Upstream | str:
        if dep.job is not None:
            return await catalog_upstream(activity.client(), dep.job)
        async with conn.cursor(row_factory=class_row(ScheduleRow)) as cur:
            await cur.execute(_Q["runtime_upstream"], {"tenant": wait.tenant, "name": dep.schedule})
            row = await cur.fetchone()
        if row is None:
            return f"tenant {wait.tenant!r} has no live schedule named {dep.schedule!r}"
        # Its slots a business calendar skips are never due.
        timing = row.timing(calendar_rule(row.calendar_definition, row.on_holiday))
        return Upstream(ledger=ledger_name(row.id), timing=timing, since=row.timing_since)

    @staticmethod
    async def _record(
        conn: AsyncConnection, wait: WaitInput, result: WaitResult, now: datetime
    ) -> None:
        detail = [up.model_dump(mode="json") for up in result.upstreams]
        await conn.execute(
            _Q["record_wait"],
            {
                "execution_id": wait.execution_id,
                "job_name": wait.job_name,
                "scheduled_at": wait.scheduled_at,
                "workflow_id": wait.workflow_id,
                "run_id": wait.run_id,
                "upstreams": sorted({up.ledger for up in result.upstreams if up.ledger}),
                "began_at": wait.began_at,
                "deadline": result.deadline,
                "status": WAIT_STATUS[result.state],
                "progress": result.progress,
                "detail": Jsonb(detail),
                "reason": result.reason,
                "now": now,
            },
        )


async def signal_waiting(conn: AsyncConnection, client: Client, upstreams: list[str]) -> int:
    """Signal every run waiting on one of `upstreams` (ledger names) to check again; how
    many were signalled. A run that closed meanwhile is passed over."""
    cur = await conn.execute(_Q["waiting_on"], {"upstreams": upstreams})
    signalled = 0
    for workflow_id, run_id in await cur.fetchall():
        try:
            await client.get_workflow_handle(workflow_id, run_id=run_id).signal(
                UPSTREAM_SETTLED_SIGNAL
            )
            signalled += 1
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
    return signalled
