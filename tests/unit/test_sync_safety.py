"""The prune guard and the order of sync's writes, without servers; the future-slot rule."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from temporalio.service import RPCError, RPCStatusCode

from activities.catchup.missed import PlanInput, future_slot_reason
from schedules.server.sync_lock import SyncLock, SyncLockError
from schedules.sync.safety import (
    PruneRefusedError,
    SyncIncompleteError,
    apply_in_order,
    check_prune,
)
from timing import Timing


@pytest.mark.parametrize(
    ("deleted", "managed", "max_prune", "refused"),
    [
        (0, 0, 0.5, False),
        (1, 2, 0.5, False),  # half
        (2, 3, 0.5, True),  # more than half
        (1, 1, 0.5, True),  # the only one: all of them
        (5, 5, 0.99, True),  # all of them, whatever the share
        (5, 5, 1.0, False),  # --max-prune 100
        (0, 5, 0.0, False),
        (1, 10, 0.0, True),  # --max-prune 0: no prune at all
    ],
)
def test_the_prune_guard(deleted, managed, max_prune, refused):
    ids = [f"job-{i}" for i in range(deleted)]
    if refused:
        with pytest.raises(PruneRefusedError) as err:
            check_prune(ids, managed, max_prune)
        assert ", ".join(ids) in str(err.value) and "Nothing was changed" in str(err.value)
    else:
        check_prune(ids, managed, max_prune)


@dataclass
class Change:
    job_id: str
    action: str


async def test_deletes_come_last_and_only_after_every_other_write_succeeded():
    done: list[str] = []
    checks: list[str] = []

    async def apply(change):
        if change.job_id == "bad":
            raise RPCError(
                "WorkflowId exceeds maximum allowed length", RPCStatusCode.INVALID_ARGUMENT, b""
            )
        done.append(f"{change.action} {change.job_id}")

    async def ensure_held(before):
        checks.append(before)

    changes = [
        Change("old", "delete"),
        Change("a", "create"),
        Change("b", "update"),
        Change("c", "unchanged"),
    ]
    await apply_in_order(changes, apply, ensure_held, 4)
    assert done[-1] == "delete old" and set(done[:2]) == {"create a", "update b"}
    assert checks == ["deleting"]

    done.clear()
    with pytest.raises(SyncIncompleteError) as err:
        await apply_in_order([*changes, Change("bad", "create")], apply, ensure_held, 4)
    assert "delete old" not in done
    text = str(err.value)
    assert text.startswith("sync stopped part-way: 2 of 4 change(s) applied (create a, update b")
    assert "create bad failed: INVALID_ARGUMENT: WorkflowId exceeds maximum allowed length" in text
    assert "not attempted: delete old" in text


async def test_a_transient_failure_is_raised_as_itself_for_the_caller_to_retry():
    async def apply(change):
        raise RPCError("shard status unknown", RPCStatusCode.INTERNAL, b"")

    async def ensure_held(before):
        pass

    with pytest.raises(RPCError):
        await apply_in_order([Change("a", "create")], apply, ensure_held, 1)

    async def too_big(change):  # gRPC's size refusal is RESOURCE_EXHAUSTED, and final
        raise RPCError(
            "grpc: received message larger than max", RPCStatusCode.RESOURCE_EXHAUSTED, b""
        )

    with pytest.raises(SyncIncompleteError):
        await apply_in_order([Change("a", "create")], too_big, ensure_held, 1)


def plan(scheduled_at: datetime, started_at: datetime) -> PlanInput:
    return PlanInput(
        job_name="j",
        scheduled_at=scheduled_at,
        started_at=started_at,
        workflow_id="w",
        run_id="r",
        timing=Timing(cron="30 2 * * *"),
    )


def test_a_slot_after_its_runs_start_is_not_run():
    start = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    assert future_slot_reason(plan(start - timedelta(days=3), start)) is None  # a backfill
    assert future_slot_reason(plan(start + timedelta(seconds=30), start)) is None  # clock skew
    reason = future_slot_reason(plan(start + timedelta(days=30), start))
    assert reason == (
        "not run: slot 2026-12-31T09:00:00Z is after this run started (2026-12-01T09:00:00Z); "
        "a slot runs once its time has come, on schedule or by a later backfill"
    )


async def test_a_sync_that_outlasts_its_lease_stops_writing_and_says_how_far_it_got():
    # The lease has run out by this process's clock: no write may start, and the sync says
    # what it applied before (nothing here) instead of listing every write as failed.
    lock = SyncLock(client=None, run_id="r", lease_seconds=30.0, taken_at=time.monotonic() - 29)
    written = []

    async def apply(change):
        lock.ensure_lease_left(f"writing {change.job_id}")
        written.append(change.job_id)

    async def held(before):
        lock.ensure_lease_left(before)

    changes = [SimpleNamespace(job_id=f"j{i}", action="create") for i in range(3)]
    with pytest.raises(SyncLockError, match=r"0 of 3 change\(s\) were applied") as raised:
        await apply_in_order(changes, apply, held, 2)
    assert written == [] and "SYNC_LOCK_SECONDS" in str(raised.value)
