"""One sync at a time per namespace: a lease held as a Temporal workflow that never runs.

Two syncs of different catalogs at once would each create, update and delete from their own
plan and leave a mix of both. So `sync` first starts the workflow `scheduled-jobs-sync-lock`
(type `ScheduledJobsSyncLock`, on a task queue nobody polls) with the id-conflict policy
FAIL: the server lets one start succeed and refuses the others while it runs. No worker is
needed; the workflow only has to exist.

- *Release*: the holder terminates its own run (by run id, so never another's) when done.
- *Crash*: the workflow's execution timeout is the lease (`SYNC_LOCK_SECONDS`, 5 minutes by
  default): a sync killed while holding it blocks others at most that long. The holder
  checks the lease before each phase of writes and stops, exit 1, if it ran out.
- *Waiting*: a sync that finds the lock held waits for that run to close (a long poll on its
  result, no busy loop) for up to `--lock-wait` seconds, then tries again; past that it
  exits 1 naming the holder and when its lease ends.

Why Temporal and not a PostgreSQL advisory lock: sync talks only to Temporal (it runs in
deploy pipelines and the compose one-shot with no database access), and what it protects
is Temporal state, in the same namespace as the lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from core.errors import SchedulerError

logger = logging.getLogger(__name__)

LOCK_WORKFLOW_ID = "scheduled-jobs-sync-lock"
LOCK_WORKFLOW_TYPE = "ScheduledJobsSyncLock"
LOCK_TASK_QUEUE = "scheduled-jobs-sync-lock"  # polled by nobody: the workflow never runs
DEFAULT_LEASE_SECONDS = 300.0
# A holder stops before writing when less than this is left of its lease.
LEASE_MARGIN_SECONDS = 15.0


class SyncLockError(SchedulerError):
    """The sync lock could not be taken, or was lost: nothing more was changed."""

    exit_code = 1


@dataclass
class SyncLock:
    """The lease of one sync: its run of the lock workflow."""

    client: Client
    run_id: str
    lease_seconds: float
    taken_at: float  # time.monotonic()

    def ensure_lease_left(self, before: str) -> None:
        """Raise `SyncLockError` if the lease has less than its margin left, by this
        process's clock alone (no call): checked before every write, so a sync that
        outlasts its lease (a first sync of many thousands of schedules) stops writing
        before another sync could take the lock; a re-run carries on from what it wrote."""
        left = self.taken_at + self.lease_seconds - time.monotonic()
        if left < LEASE_MARGIN_SECONDS:
            raise SyncLockError(
                f"sync stopped before {before}: it has held the sync lock for nearly its "
                f"lease of {self.lease_seconds:g}s (SYNC_LOCK_SECONDS); run sync again, "
                "or raise SYNC_LOCK_SECONDS for a sync this large"
            )

    async def ensure_held(self, before: str) -> None:
        """Raise `SyncLockError` unless the lease still has a margin and the lock workflow
        run is still ours and running. `before` says what is about to happen."""
        self.ensure_lease_left(before)
        handle = self.client.get_workflow_handle(LOCK_WORKFLOW_ID, run_id=self.run_id)
        described = await handle.describe()
        if described.status != WorkflowExecutionStatus.RUNNING:
            raise SyncLockError(
                f"sync stopped before {before}: its sync lock ended "
                f"({described.status.name if described.status else 'unknown'}); run sync again"
            )

    async def release(self) -> None:
        handle = self.client.get_workflow_handle(LOCK_WORKFLOW_ID, run_id=self.run_id)
        try:
            await handle.terminate(reason="sync finished")
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:  # already ended (its lease ran out)
                logger.warning("could not release the sync lock: %s", err.message)


def holder_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


async def _holder_text(client: Client, run_id: str | None) -> str:
    try:
        described = await client.get_workflow_handle(LOCK_WORKFLOW_ID, run_id=run_id).describe()
    except RPCError:
        return "another sync"
    holder = (await described.memo_value("holder", default=None)) or "another sync"
    started = described.start_time
    if started is None:
        return str(holder)
    lease = float(await described.memo_value("lease_seconds", default=DEFAULT_LEASE_SECONDS))
    ends = started + timedelta(seconds=lease)
    return f"{holder} (since {_utc(started)}, lease ends {_utc(ends)})"


def _utc(instant: datetime) -> str:
    return instant.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@contextlib.asynccontextmanager
async def sync_lock(
    client: Client,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    wait_seconds: float = 60.0,
) -> AsyncIterator[SyncLock]:
    """Hold the namespace's sync lock for the block; wait up to `wait_seconds` for it."""
    deadline = time.monotonic() + wait_seconds
    holder = holder_name()
    while True:
        try:
            handle = await client.start_workflow(
                LOCK_WORKFLOW_TYPE,
                id=LOCK_WORKFLOW_ID,
                task_queue=LOCK_TASK_QUEUE,
                execution_timeout=timedelta(seconds=lease_seconds),
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                memo={"holder": holder, "lease_seconds": lease_seconds},
                static_summary=f"python -m schedules sync lock, held by {holder}",
            )
            break
        except WorkflowAlreadyStartedError as err:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SyncLockError(
                    "another sync is running in this namespace: the sync lock is held by "
                    f"{await _holder_text(client, err.run_id)}; nothing was changed. Run "
                    f"sync again later (--lock-wait to wait longer); if that sync crashed, "
                    f"its lock ends with its lease, or: temporal workflow terminate "
                    f"--workflow-id {LOCK_WORKFLOW_ID}"
                ) from None
            other = client.get_workflow_handle(LOCK_WORKFLOW_ID, run_id=err.run_id)
            with contextlib.suppress(Exception):  # terminated, timed out, or still running
                await asyncio.wait_for(other.result(follow_runs=False), timeout=left)
    lock = SyncLock(
        client, handle.result_run_id or handle.run_id or "", lease_seconds, time.monotonic()
    )
    try:
        yield lock
    finally:
        await asyncio.shield(lock.release())
