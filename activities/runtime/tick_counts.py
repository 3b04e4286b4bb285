"""What one dispatcher tick did, and where its time went (issue 40, item 6): the tick's
result, and its heartbeat details while it runs. Counts and milliseconds only (no tenant,
no schedule, no parameter), so the ledger row of a dispatcher's run and the Temporal UI
can show them and the bench (`bench/noisy_neighbour.py`) print them.

The durations are wall-clock milliseconds summed over the tick's rounds: the phases of a
decide transaction (`due_ms`, `limits_ms`, `record_ms`, `defer_ms`; `decide_ms` the whole
transaction, commit included), the reads and marks around the starts (`unstarted_ms`),
and the starts by kind (`batch_start_ms`, `slot_start_ms`: from a round's first start to
its last of that kind, so concurrent starts count once). `gate_wait_ms` is the longest a
start waited for the process's start gate; `batches_started_ms` when, from the tick's
beginning, its last batch run was started (the small tenants' runs wait for it).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields


@dataclass
class TickCounts:
    """What one tick did, for the dispatcher's result and the bench."""

    due: int = 0  # schedules decided
    intents: int = 0  # new intents recorded
    skipped: int = 0  # missed slots recorded skipped
    deferred: int = 0  # schedules whose due slot a tenant limit held back
    started: int = 0  # workflows started
    already_started: int = 0  # starts Temporal refused: started before
    statements: int = 0  # SQL statements run
    rounds: int = 0  # decide transactions
    tick_ms: int = 0
    shards_ms: int = 0
    decide_ms: int = 0
    due_ms: int = 0
    limits_ms: int = 0
    record_ms: int = 0
    defer_ms: int = 0
    unstarted_ms: int = 0
    batch_start_ms: int = 0
    slot_start_ms: int = 0
    gate_wait_ms: int = 0
    batches_started_ms: int = 0
    began: float = field(default_factory=time.monotonic, repr=False)

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "began"}

    def elapsed_ms(self, since: float | None = None) -> int:
        """Milliseconds since `since` (a `time.monotonic()`), or since the tick began."""
        return round((time.monotonic() - (self.began if since is None else since)) * 1000)

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        """Add the block's wall-clock milliseconds to the duration `name`."""
        since = time.monotonic()
        try:
            yield
        finally:
            setattr(self, name, getattr(self, name) + self.elapsed_ms(since))

    def add(self, other: TickCounts) -> None:
        """Add another tick's counts and durations (a test sums a minute's shards)."""
        for name, value in other.as_dict().items():
            setattr(self, name, getattr(self, name) + value)
