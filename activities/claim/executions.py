"""The execution record: claim a (job, scheduled time) slot, fence each unit of work, finish.

Temporal starts one workflow per schedule fire, but backfills, manual triggers and activity
retries can still run the same slot twice. The `job_executions` row keyed by
`(job_name, scheduled_at)` keeps the effect single: its `attempt` column is the fencing token
that every unit of work checks under a row lock before it commits.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.claim.auto_pause import auto_pause_in
from activities.claim.heartbeat import heartbeating
from activities.common.models import (
    STALE_ATTEMPT,
    AttemptQuery,
    ClaimInput,
    ClaimResult,
    FailureInput,
)
from activities.common.telemetry import (
    Happened,
    record_failed,
    traced,
)
from activities.outbox import notices
from core import redact
from core.sql import first_row, queries

Clock = Callable[[], datetime]

FUTURE_SLOT = "FutureSlot"
# A claim for a slot this far ahead of the server's clock is refused (see `claim_execution`).
_FUTURE_MARGIN_SECONDS = 60.0

_Q = queries("activities.claim", "executions")


def utcnow() -> datetime:
    return datetime.now(UTC)


def holder_name() -> str:
    """Identify this worker process in the execution record (host:pid)."""
    return f"{socket.gethostname()}:{os.getpid()}"


class StaleAttemptError(ApplicationError):
    """A newer attempt owns the slot; this one must commit nothing.

    Refused because the claim belongs to another workflow run, the error's details carry
    `{"claimed_by_workflow": ..., "claimed_by_run": ...}`: a run of the same workflow id is
    an earlier run of it (only one runs at a time), closed, e.g. by a reset, and the asking
    run may claim the slot again (`ScheduledJobWorkflow`)."""

    def __init__(self, message: str, *details: Any) -> None:
        super().__init__(
            f"{message}; nothing committed", *details, type=STALE_ATTEMPT, non_retryable=True
        )

    @classmethod
    def fenced(cls, execution_id: int, token: int, current: int, status: str) -> StaleAttemptError:
        """A unit of work whose fencing token is no longer the execution's."""
        return cls(
            f"execution {execution_id}: attempt {token} is stale "
            f"(current attempt {current}, status {status})"
        )

    @classmethod
    def refused(
        cls,
        execution_id: int,
        attempt: Attempt,
        claim: tuple[str | None, str | None],
        holder: list[Any],
    ) -> StaleAttemptError:
        """A take-over refused because `attempt` comes before the holder's."""
        asking = f"Temporal attempt {attempt.number} of activity {attempt.activity_seq}"
        workflow_id, claim_run_id = claim
        if claim_run_id is not None and claim_run_id != attempt.claim_run_id:
            return cls(
                f"execution {execution_id}: {asking} is stale (the slot is claimed by "
                f"workflow run {claim_run_id})",
                {"claimed_by_workflow": workflow_id, "claimed_by_run": claim_run_id},
            )
        _, seq, number = holder
        why = f"Temporal attempt {number} of activity {seq} holds the slot"
        return cls(f"execution {execution_id}: {asking} is stale ({why})")


class Fence:
    """The fencing token of one attempt at one execution."""

    def __init__(self, execution_id: int, token: int, progress: dict[str, Any]) -> None:
        self.execution_id = execution_id
        self.token = token
        self.progress = progress

    async def check(self, conn: AsyncConnection) -> None:
        """Lock the execution row and raise `StaleAttemptError` unless this attempt owns it.

        Call first inside the transaction that does the work, so a stale attempt's
        changes roll back with it. While a frozen stale attempt holds the row, this waits
        for PostgreSQL to end that session, heartbeating.
        """
        cur = await heartbeating(conn.execute(_Q["fence"], {"id": self.execution_id}))
        attempt, status = await cur.fetchone()
        if attempt != self.token or status != "running":
            raise StaleAttemptError.fenced(self.execution_id, self.token, attempt, status)

    async def save_progress(self, conn: AsyncConnection, progress: dict[str, Any]) -> None:
        await conn.execute(
            _Q["save_progress"], {"id": self.execution_id, "progress": Jsonb(progress)}
        )
        self.progress = progress

    async def complete(
        self, conn: AsyncConnection, progress: dict[str, Any], result: dict[str, Any]
    ) -> float:
        """Mark the execution completed; return its duration in seconds since its claim."""
        cur = await conn.execute(
            _Q["complete"],
            {"id": self.execution_id, "progress": Jsonb(progress), "result": Jsonb(result)},
        )
        self.progress = progress
        return float((await cur.fetchone())[0])

    async def complete_journaled(
        self, conn: AsyncConnection, progress: dict[str, Any], result: dict[str, Any]
    ) -> float:
        """`complete`, and the commit journal's row of it (`activities.claim.journal.record`),
        in one statement: the last of the transaction."""
        cur = await conn.execute(
            _Q["complete_and_journal"],
            {
                "id": self.execution_id,
                "attempt": self.token,
                "progress": Jsonb(progress),
                "result": Jsonb(result),
            },
        )
        self.progress = progress
        return float((await cur.fetchone())[0])


@dataclass(frozen=True)
class Attempt:
    """Who asks to take an execution over: one Temporal attempt of one activity.

    Attempts are ordered by (the workflow run that scheduled the activity, the activity's
    sequence number in it, the Temporal attempt number): the server schedules a retry, or
    the next activity, only after it gave up on the previous one, so a later one in this
    order is the one the server waits for. `claim_run_id` is the `ScheduledJobWorkflow` run
    that must hold the slot's claim (the same run, or the parent of a workflow job's steps).
    """

    claim_run_id: str
    run_id: str
    activity_seq: int | None
    number: int

    @classmethod
    def current(cls, claim_run_id: str | None = None) -> Attempt | None:
        """The running activity's attempt (None outside an activity)."""
        if not activity.in_activity():
            return None
        info = activity.info()
        seq = info.activity_id
        return cls(
            claim_run_id=claim_run_id or info.workflow_run_id,
            run_id=info.workflow_run_id,
            activity_seq=int(seq) if seq.isdigit() else None,
            number=info.attempt,
        )

    def params(self) -> dict[str, Any]:
        return {
            "claim_run_id": self.claim_run_id,
            "run_id": self.run_id,
            "activity_seq": self.activity_seq,
            "temporal_attempt": self.number,
        }


_NO_ATTEMPT = {"claim_run_id": None, "run_id": None, "activity_seq": None, "temporal_attempt": None}


async def take_over_in(
    conn: AsyncConnection, execution_id: int, attempt: Attempt | None = None
) -> Fence | tuple[str, dict[str, Any] | None]:
    """In `conn`'s transaction, start an attempt: raise the fencing token and return it
    with the saved progress. If the execution is no longer running, return its
    (status, result) instead.

    `attempt` (default: the running activity's) must not come before the holder's (see
    `Attempt`): an older Temporal attempt, woken in a frozen worker after a newer one took
    the slot over, or an activity of a workflow run that no longer holds the claim, raises
    `StaleAttemptError` and changes nothing.

    A frozen previous attempt may still hold the row inside its transaction: the wait for
    it heartbeats (`activities.claim.heartbeat`), so this attempt is not timed out meanwhile."""
    attempt = attempt or Attempt.current()
    params = {"id": execution_id, "holder": holder_name()}
    params |= attempt.params() if attempt else _NO_ATTEMPT
    cur = await heartbeating(conn.execute(_Q["take_over"], params))
    row = await cur.fetchone()
    if row is not None:
        return Fence(execution_id, row[0], row[1])
    cur = await conn.execute(_Q["holder"], {"id": execution_id})
    status, result, workflow_id, claim_run_id, *holder = await cur.fetchone()
    if status != "running" or attempt is None:
        return status, result
    raise StaleAttemptError.refused(execution_id, attempt, (workflow_id, claim_run_id), holder)


async def take_over(
    pool: AsyncConnectionPool, execution_id: int, attempt: Attempt | None = None
) -> Fence | tuple[str, dict[str, Any] | None]:
    """`take_over_in` in a transaction of its own."""
    async with pool.connection() as conn, conn.transaction():
        return await take_over_in(conn, execution_id, attempt)


class ExecutionActivities:
    """Activities that read and write `job_executions`; built by the worker with its pool."""

    def __init__(self, pool: AsyncConnectionPool, clock: Clock = utcnow) -> None:
        self.pool = pool
        self.clock = clock

    @activity.defn
    @traced("db.claim_execution")
    async def claim_execution(self, claim: ClaimInput) -> ClaimResult:
        """`claim_in` in a transaction of its own: the claim of a workflow that plans in a
        separate activity (`activities.run.begin.begin_run` does both in one)."""
        # The server's clock for both (the attempt's scheduled and started times), never
        # this worker's: a skewed worker cannot call an on-time slot late.
        info = activity.info() if activity.in_activity() else None
        server_now = info.current_attempt_scheduled_time if info else self.clock()
        now = info.started_time if info else self.clock()
        async with self.pool.connection() as conn, conn.transaction():
            claimed, happened = await claim_counted_in(conn, claim, server_now=server_now, now=now)
        happened.record()  # committed: counted once
        return claimed

    @activity.defn
    async def attempt_took_over(self, query: AttemptQuery) -> bool:
        """Whether `query`'s attempt took the slot over. False when it never reached the
        database: the server handed it to a worker that could not run it (a frozen
        process's open poll), so it timed out without doing anything."""
        row = await first_row(
            self.pool,
            _Q["attempt_took_over"],
            {
                "id": query.execution_id,
                "run_id": query.run_id,
                "activity_seq": query.activity_seq,
                "temporal_attempt": query.attempt,
            },
        )
        return bool(row and row[0])

    @activity.defn
    @traced("db.record_failure")
    async def record_failure(self, failure: FailureInput) -> None:
        """Mark the execution failed, unless another workflow run has taken it over; a
        schedule failing its K-th slot in a row is paused in the same transaction
        (`activities.claim.auto_pause`), and the notices of both are queued in it
        (`activities.outbox.notices`)."""
        params = {
            "id": failure.execution_id,
            "run_id": failure.run_id,
            "error": redact.scrub(failure.error),
            "attempts": failure.attempts,
        }
        async with self.pool.connection() as conn, conn.transaction():
            row = await (await conn.execute(_Q["fail"], params)).fetchone()
            if row is not None:
                note = await auto_pause_in(conn, row[0], failure.pause_after_failures)
                await notices.failed_in(conn, row[0], row[1], params["error"], note, failure.notify)
        record_failed(row[0] if row else None)


async def claim_in(
    conn: AsyncConnection, claim: ClaimInput, *, server_now: datetime, now: datetime
) -> ClaimResult:
    """In `conn`'s transaction, record that a run of (job, scheduled_at) begins, or say why
    it must not.

    A completed or skipped slot is a no-op (counted as a duplicate run); a failed one is
    retried (a workflow job resumes at its first unfinished step), a compensated one starts
    over; a run that starts after its starting deadline is recorded as skipped. A slot whose
    time has not come by `server_now` (the Temporal server's clock) is refused and nothing
    is recorded: its real run comes at its time. The workflow's plan normally stops such a
    run first (`activities.catchup.missed.future_slot_reason`).
    """
    claimed, happened = await claim_counted_in(conn, claim, server_now=server_now, now=now)
    happened.record()
    return claimed


async def claim_counted_in(
    conn: AsyncConnection, claim: ClaimInput, *, server_now: datetime, now: datetime
) -> tuple[ClaimResult, Happened]:
    """`claim_in`, and what it did for the metrics, for its caller to record once its
    transaction committed."""
    found, params = await _insert_claim(conn, claim, server_now=server_now, now=now)
    if isinstance(found, ClaimResult):
        return found, claim_happened(claim, found, now)
    row = found
    if row["status"] in ("completed", "skipped"):
        await conn.execute(_Q["record_duplicate"], {"id": row["id"]})
        activity.logger.info(
            "execution already %s", row["status"], extra=_log_fields(claim, row["id"])
        )
        duplicate = ClaimResult(
            execution_id=row["id"],
            outcome=row["status"],
            reason=f"this slot was already {row['status']}",
        )
        return duplicate, Happened(claim.job_name, duplicate=(row["id"], row["status"]))
    if row["status"] == "compensated":
        await conn.execute(_Q["forget_steps"], {"id": row["id"]})
    await conn.execute(_Q["reclaim"], params | {"id": row["id"]})
    lateness = (now - (claim.due_at or claim.scheduled_at)).total_seconds()
    activity.logger.info(
        "execution reclaimed from status %s", row["status"], extra=_log_fields(claim, row["id"])
    )
    reclaimed = ClaimResult(execution_id=row["id"], outcome="claimed")
    return reclaimed, Happened(claim.job_name, claim=(row["id"], lateness, False))


@dataclass(frozen=True)
class OwnClaim:
    """What `claim_own_in` found: the claim (None: another run's slot, left alone); the
    attempt's `Fence` when it inserted the row already taken over (count the claim with
    `count_claim` once committed); `inserted`: it inserted the row (taken over, or
    skipped past the starting deadline)."""

    claim: ClaimResult | None
    fence: Fence | None = None
    inserted: bool = False
    # A running row of this run, found by a `resumable` claim: an earlier attempt committed
    # the run's first chunk and its progress (`activities.run.begin`); the work goes on from it.
    running: bool = False


async def claim_own_in(
    conn: AsyncConnection,
    claim: ClaimInput,
    *,
    server_now: datetime,
    now: datetime,
    resumable: bool = False,
) -> OwnClaim:
    """`claim_in` inside the transaction of the work itself (`activities.run.begin`), where
    only this workflow run's own row may be touched.

    A slot with no row is claimed and taken over by the running attempt in one statement
    (`claim_and_take_over`: token 1, journaled, the transaction named for the outbox), or
    recorded skipped past its starting deadline. Another run's row, whatever its status,
    is left as it is and the claim is None: the caller commits nothing and begins as a run
    of separate claim and work does (`claim_in`: the duplicate counted, a failed slot
    retried, a running one passed on).

    A row of this run: an attempt of this activity commits only a finished slot (completed,
    or skipped past its deadline), so such a row was written by an earlier attempt whose
    result never reached the server, and it stands (the caller's take-over finds the
    completion and its counts). A row of this run in any other state was written after
    this activity ended, by the run's `begin_run` (it declined, or failed for good): this
    attempt is one the server has given up on, and is refused (`StaleAttemptError`).
    Unless `resumable` (a chunked kind's begin, which commits its first chunk with the
    slot still running): a running row of this run is then passed on (`running`), and the
    caller commits nothing more; the work activity's take-over decides who goes on.
    """
    attempt = Attempt.current()
    taking = {"holder": holder_name()} | (attempt.params() if attempt else _NO_ATTEMPT)
    taking["run_id_of_attempt"] = taking.pop("run_id")
    new = await _insert_claim(
        conn, claim, server_now=server_now, now=now, query="claim_and_take_over", extra=taking
    )
    found, inserted = new
    if isinstance(found, ClaimResult):
        fence = Fence(found.execution_id, inserted["attempt"], {}) if inserted["attempt"] else None
        return OwnClaim(found, fence, inserted=True)
    row = found
    if row["run_id"] != claim.run_id:
        return OwnClaim(None)
    status = row["status"]
    if status == "completed":
        return OwnClaim(ClaimResult(execution_id=row["id"], outcome="claimed"))
    if status == "skipped":
        return OwnClaim(ClaimResult(execution_id=row["id"], outcome="skipped", reason=row["error"]))
    if resumable and status == "running":
        return OwnClaim(ClaimResult(execution_id=row["id"], outcome="claimed"), running=True)
    raise StaleAttemptError(
        f"execution {row['id']}: this workflow run claimed it after this activity ended "
        f"(status {status})"
    )


async def _insert_claim(
    conn: AsyncConnection,
    claim: ClaimInput,
    *,
    server_now: datetime,
    now: datetime,
    query: str = "insert_claim",
    extra: dict[str, Any] | None = None,
) -> tuple[ClaimResult, dict[str, Any]] | tuple[dict[str, Any], dict[str, Any]]:
    """Insert the slot's row (running, or skipped past the starting deadline) with
    `query` and return (the claim, the row inserted); or, if the slot has a row, lock it
    and return (that row, the claim's parameters)."""
    due = claim.due_at or claim.scheduled_at  # a slot moved by a calendar runs at due_at
    ahead = (due - server_now).total_seconds()
    if ahead > _FUTURE_MARGIN_SECONDS:
        raise ApplicationError(
            f"{claim.job_name}: slot {due.isoformat()} is {ahead:.0f}s in "
            "the future; a slot is claimed only once its time has come",
            type=FUTURE_SLOT,
            non_retryable=True,
        )
    lateness = (now - due).total_seconds()
    late = (
        claim.starting_deadline_seconds is not None and lateness > claim.starting_deadline_seconds
    )
    reason = (
        f"missed starting deadline: started {lateness:.0f}s after the scheduled time, "
        f"deadline {claim.starting_deadline_seconds:.0f}s"
        if late
        else None
    )
    params = claim.model_dump() | {
        "origin": claim.origin or "scheduled",
        "status": "skipped" if late else "running",
        "error": reason,
    }
    # Row factory on a cursor, never on the pooled connection.
    cur = conn.cursor(row_factory=dict_row)
    # Both wait while a frozen attempt's open transaction holds the slot's row or key.
    await heartbeating(cur.execute(_Q[query], params | (extra or {})))
    row = await cur.fetchone()
    if row is not None:
        outcome = "skipped" if late else "claimed"
        return ClaimResult(execution_id=row["id"], outcome=outcome, reason=reason), row
    await heartbeating(cur.execute(_Q["lock_claim"], params))
    return await cur.fetchone(), params


def count_claim(claim: ClaimInput, claimed: ClaimResult, now: datetime) -> None:
    """Count and log a claim that inserted its slot's row: its lateness, or its skip."""
    claim_happened(claim, claimed, now).record()


def claim_happened(claim: ClaimInput, claimed: ClaimResult, now: datetime) -> Happened:
    """What a claim that inserted its slot's row did, for the metrics (its lateness, or its
    skip), logged."""
    lateness = (now - (claim.due_at or claim.scheduled_at)).total_seconds()
    activity.logger.info(
        "execution %s", claimed.outcome, extra=_log_fields(claim, claimed.execution_id)
    )
    skipped = claimed.outcome == "skipped"
    return Happened(claim.job_name, claim=(claimed.execution_id, lateness, skipped))


def _log_fields(claim: ClaimInput, execution_id: int) -> dict[str, Any]:
    return {
        "job": claim.job_name,
        "scheduled_at": claim.scheduled_at.isoformat(),
        "execution_id": execution_id,
        "workflow_id": claim.workflow_id,
    }
