"""How long a run may live: every workflow the engine starts has an execution timeout.

A run ends when its work ends, and work retried without end never would: an open run of
an old release would then hold back the removal of the code that finishes it
(docs/architecture.md, Compatibility shims and patches). So every run is bounded, by a
bound larger than anything its declared timeouts and retries let it take:

- a catalog job's run (`schedules.catalog.model.JobSpec.lifetime`, the schedule action's
  `execution_timeout`): each slot it may run (its catch-up policy's), each with its wait
  for upstream slots and its work, retries and attempt series included;
- a workflow job's steps (the child workflow): its parent's bound, and it ends with it;
- a runtime schedule's slot run (`RUNTIME_RUN_LIFETIME`) and batch (`BATCH_LIFETIME`),
  from the limits a runtime kind is held to (`activities.run.kinds.RuntimeKind`).

Every activity of a run has a finite retry policy: a number of attempts, or a
schedule-to-close timeout. Pure arithmetic, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

MAX_SERIES = 10
"""At most this many attempt series of one work activity (`workflows.attempts`)."""

BOOKKEEPING = timedelta(hours=1)
"""The schedule-to-close timeout of each bookkeeping activity (begin, claim, a failure's
record, a note): it retries until the database is back, for up to this long."""

LONGEST_WITHIN = timedelta(days=31)
"""The longest `within` a dependency takes (docs/dependencies.md)."""

WAIT_OVERDUE = timedelta(days=7)
"""How long a slot under `on_failure = "wait"` keeps waiting once its `within` passed
(`check` alerts `dependency_overdue` meanwhile) before its run's bound ends it."""

RUNTIME_WORK_LIMIT = timedelta(days=7)
"""The longest a runtime kind's work may take with all its attempts and series
(`RuntimeKind`'s `timeout` and `attempts`, checked when the kind is declared)."""

RUNTIME_RETRY_INTERVAL = timedelta(minutes=1)
"""The longest wait between two attempts of a runtime slot's work (`workflows.runtime_run`)."""

BATCH_CALL = timedelta(days=1)
"""The schedule-to-close timeout of one activity call of a runtime batch."""


def work_bound(timeout: timedelta, attempts: int, maximum_interval: timedelta) -> timedelta:
    """The longest one work activity may take: every attempt at its timeout, every wait
    between attempts at the longest interval, in each of `MAX_SERIES` series."""
    return MAX_SERIES * (attempts * timeout + (attempts - 1) * maximum_interval)


def wait_bound(within: Sequence[timedelta], waits_past_deadline: bool) -> timedelta:
    """The longest a slot waits for its upstream slots: its longest `within`, and
    `WAIT_OVERDUE` more when a dependency keeps waiting past it (`on_failure = "wait"`)."""
    if not within:
        return timedelta(0)
    return max(within) + (WAIT_OVERDUE if waits_past_deadline else timedelta(0))


def run_lifetime(slots: int, wait: timedelta, work: timedelta) -> timedelta:
    """A run of `slots` slots, each waiting up to `wait` and working up to `work`, with
    the bookkeeping of the run (its begin, its notes) and of each slot (claim, failure)."""
    return 2 * BOOKKEEPING + slots * (wait + work + 2 * BOOKKEEPING)


RUNTIME_RUN_LIFETIME = run_lifetime(1, LONGEST_WITHIN + WAIT_OVERDUE, RUNTIME_WORK_LIMIT)
"""The bound of every `RuntimeRunWorkflow` (started before its kind and dependencies are
read): the longest wait any runtime schedule may declare, and the longest work of any kind."""


def batch_lifetime(slots: int, per_call: int) -> timedelta:
    """The bound of a `RuntimeBatchWorkflow` of up to `slots` slots, `per_call` per
    activity call: every call (the last one finds none left) at its `BATCH_CALL`."""
    return (slots // per_call + 2) * BATCH_CALL
