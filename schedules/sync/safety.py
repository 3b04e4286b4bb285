"""What keeps a sync from doing harm: the prune guard and an honest account of a part-way stop.

- *Prune guard.* A catalog that lost its jobs by mistake (an empty file, a file of comments,
  the wrong `--catalog`) would make sync delete every schedule it manages. A sync that would
  delete more than `max_prune` of the managed schedules (half by default), and so any sync
  that would delete all of them, stops before its first write and names every schedule it
  would have deleted; `--max-prune 100` lets it through.
- *Order.* Creates and updates go first, deletes only once every one of them succeeded:
  a sync that stops part-way leaves schedules a re-run converges from, never a namespace
  with the old jobs gone and the new ones missing.
- *Account.* When a write fails for good, the error names what was applied, what failed
  and why (the server's own words), and what was not attempted; exit 1.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from temporalio.service import RPCError

from core import redact
from core.errors import SchedulerError, first_line
from schedules.server.retry import transient_rpc
from schedules.server.sync_lock import SyncLockError

logger = logging.getLogger(__name__)

DEFAULT_MAX_PRUNE = 0.5


class PruneRefusedError(SchedulerError):
    """A sync would delete more of the managed schedules than allowed; nothing was changed."""


@dataclass
class Outcome:
    """How one planned change went."""

    job_id: str
    action: str
    error: str | None = None  # None: applied
    attempted: bool = True


@dataclass
class SyncIncompleteError(SchedulerError):
    """Some writes of a sync failed for good; `outcomes` says which were applied."""

    outcomes: list[Outcome] = field(default_factory=list)
    exit_code = 1

    def __post_init__(self) -> None:
        super().__init__(self.describe())

    def describe(self) -> str:
        done = [o for o in self.outcomes if o.attempted and o.error is None]
        failed = [o for o in self.outcomes if o.error is not None]
        skipped = [o for o in self.outcomes if not o.attempted]
        parts = [
            f"sync stopped part-way: {len(done)} of {len(self.outcomes)} change(s) applied"
            + (f" ({_ids(done)})" if done else "")
        ]
        parts += [f"{o.action} {o.job_id} failed: {o.error}" for o in failed]
        if skipped:
            parts.append(
                f"not attempted: {_ids(skipped)} (deletes wait until every create and update "
                "succeeded)"
            )
        parts.append("fix the cause and run sync again: it carries on from this state")
        return "; ".join(parts)


def _ids(outcomes: list[Outcome]) -> str:
    return ", ".join(f"{o.action} {o.job_id}" for o in outcomes)


def error_text(err: BaseException) -> str:
    """A write's failure as one line: the server's status and message, scrubbed."""
    if isinstance(err, RPCError):
        status = err.status.name if err.status is not None else "error"
        return redact.scrub(f"{status}: {err.message}")
    return redact.scrub(f"{type(err).__name__}: {first_line(err, '')}".rstrip(": "))


def check_prune(deleted: list[str], managed: int, max_prune: float) -> None:
    """Raise `PruneRefusedError` if deleting `deleted` of the `managed` schedules is more
    than the `max_prune` share (and so whenever it is all of them)."""
    if not deleted or max_prune >= 1:
        return
    if len(deleted) <= max_prune * managed and len(deleted) < managed:
        return
    share = len(deleted) / managed if managed else 1.0
    raise PruneRefusedError(
        f"sync refused: it would delete {len(deleted)} of the {managed} schedule(s) this "
        f"project manages ({share:.0%}), more than --max-prune {max_prune:.0%} allows: "
        f"{', '.join(sorted(deleted))}. Nothing was changed. Is this the right catalog? "
        "To delete them, run again with --max-prune 100; to keep them, --no-prune"
    )


class _Change(Protocol):
    job_id: str
    action: str  # create | update | delete | unchanged


async def apply_in_order(
    changes: Sequence[Any],
    apply: Callable[[Any], Awaitable[None]],
    ensure_held: Callable[[str], Awaitable[None]],
    concurrency: int,
) -> None:
    """Creates and updates, then (only if all succeeded) deletes, `concurrency` at a time.

    A write that fails for good raises `SyncIncompleteError` saying what was applied; when
    every failure is transient the first is raised instead (the caller's retry plans again
    from what the server has now). `ensure_held(what)` checks the sync lock before a phase.
    """
    limit = asyncio.Semaphore(concurrency)

    async def one(change: _Change) -> None:
        async with limit:
            await apply(change)

    writes = [c for c in changes if c.action in ("create", "update")]
    deletes = [c for c in changes if c.action == "delete"]
    outcomes: list[Outcome] = []
    for phase, batch in (("its first write", writes), ("deleting", deletes)):
        if not batch:
            continue
        if phase == "deleting":
            await ensure_held(phase)
        results = await asyncio.gather(*(one(c) for c in batch), return_exceptions=True)
        for change, result in zip(batch, results, strict=True):
            if isinstance(result, BaseException) and not isinstance(result, Exception):
                raise result  # cancelled
            error = error_text(result) if isinstance(result, Exception) else None
            outcomes.append(Outcome(change.job_id, change.action, error))
        errors = [r for r in results if isinstance(r, Exception)]
        if not errors:
            continue
        lost = next((e for e in errors if isinstance(e, SyncLockError)), None)
        if lost is not None:  # the lease ran out: every later write stopped the same way
            applied = sum(1 for o in outcomes if o.error is None)
            total = sum(1 for c in changes if c.action != "unchanged")
            raise SyncLockError(
                f"{lost}; {applied} of {total} change(s) were applied before it stopped, "
                "and a re-run carries on from them"
            ) from None
        if all(transient_rpc(e) for e in errors):
            raise errors[0]
        tried = {(o.job_id, o.action) for o in outcomes}
        outcomes += [
            Outcome(c.job_id, c.action, attempted=False)
            for c in changes
            if c.action != "unchanged" and (c.job_id, c.action) not in tried
        ]
        raise SyncIncompleteError(outcomes)


async def wait_for_listing(
    listed: Callable[[], Awaitable[dict[str, tuple[bool, str | None]]]],
    changes: Sequence[Any],
    digests: dict[str, str] | None,
    timeout: float = 10.0,
) -> None:
    """Wait (up to `timeout`) until the schedule listing shows the `changes` just applied.

    `listed()` gives each listed schedule's (managed, digest); `digests` the digest each
    created or updated schedule now carries (None: schedules carry none). Visibility lags
    behind the server: a sync that plans from a listing without the schedules the previous
    one created would not delete them, and one that still lists an old digest would take a
    schedule for unchanged. Held under the sync lock, this makes each sync plan from the
    result of the one before.
    """
    if not any(c.action != "unchanged" for c in changes):
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        shown = await listed()
        pending = [
            c.job_id
            for c in changes
            if (c.action == "delete" and c.job_id in shown)
            or (
                c.action in ("create", "update")
                and (
                    c.job_id not in shown
                    or not shown[c.job_id][0]
                    or (digests is not None and shown[c.job_id][1] != digests[c.job_id])
                )
            )
        ]
        if not pending:
            return
        if loop.time() > deadline:
            logger.warning(
                "the schedule listing does not show %d change(s) of this sync after %gs "
                "(%s); a sync right after this one may plan from an older listing",
                len(pending),
                timeout,
                ", ".join(pending[:10]),
            )
            return
        await asyncio.sleep(0.1)
