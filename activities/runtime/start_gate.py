"""The gate the dispatcher's workflow starts pass, one per worker process (issue 40, item 6).

Every shard a process ticks starts its runs through one gate: at most `START_CONCURRENCY`
starts in flight at once, as one client would have (bench/RESULTS.md, runtime herd). A
plain semaphore served them first come, first served, and that was the noisy neighbour's
delay: a shard starting a limited tenant's 100 runs (one workflow each) took every place,
and the other shards' single batch runs, each the slots of hundreds of small tenants,
waited behind them for the gate (about 3 s) and then in the server's queue behind the
starts in flight (3 to 5 s more), on a loaded machine (bench/results/2026-12-08-tenants.md).

So the gate is fair, as the decide transaction is: each start names its *key* (a run's
tenant; a batch run its own id: its slots are many tenants'), a free place goes to the
waiting keys in turn, each key's starts in their order, and one key holds at most
`PER_KEY` places. A tenant with thousands of runs to start still starts them as fast as
the server takes them (a few in flight keep it busy), but never fills its queue: another
key's start waits for at most `PER_KEY` starts ahead of it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

START_CONCURRENCY = 64  # workflow starts in flight at once, per process
PER_KEY = 8  # of them, for one key (one tenant's runs, one batch)


class StartGate:
    """At most `limit` holders at once, at most `per_key` of one key; free places go to
    the waiting keys round-robin, each key's waiters first come, first served."""

    def __init__(self, limit: int = START_CONCURRENCY, per_key: int = PER_KEY) -> None:
        self.limit = limit
        self.per_key = per_key
        self.holding = 0
        self.held: dict[str, int] = {}
        self.waiting: dict[str, deque[asyncio.Future[None]]] = {}
        self.turns = 0  # places given
        self.served: dict[str, int] = {}  # each key's last turn (its place in the line)

    @asynccontextmanager
    async def place(self, key: str) -> AsyncIterator[None]:
        """Hold a place for `key` while the block runs."""
        await self._acquire(key)
        try:
            yield
        finally:
            self._release(key)

    def _free(self, key: str) -> bool:
        return self.holding < self.limit and self.held.get(key, 0) < self.per_key

    def _take(self, key: str) -> None:
        self.holding += 1
        self.held[key] = self.held.get(key, 0) + 1
        self.turns += 1
        self.served[key] = self.turns

    async def _acquire(self, key: str) -> None:
        if key not in self.waiting and self._free(key):
            self._take(key)
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiting.setdefault(key, deque()).append(granted)
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self._release(key)  # granted as it was cancelled: give the place back
            else:
                self._forget(key, granted)
            raise

    def _forget(self, key: str, granted: asyncio.Future[None]) -> None:
        queue = self.waiting.get(key)
        if queue is not None and granted in queue:
            queue.remove(granted)
            if not queue:
                del self.waiting[key]
                if key not in self.held:
                    self.served.pop(key, None)

    def _release(self, key: str) -> None:
        self.holding -= 1
        self.held[key] -= 1
        if not self.held[key]:
            del self.held[key]
        if key not in self.held and key not in self.waiting:
            self.served.pop(key, None)  # neither holding nor waiting: forgotten
        self._wake()

    def _wake(self) -> None:
        """Give free places to the waiting keys in turn: the one served longest ago (or
        never) first, each key's waiters in their order. A scan of the waiting keys per
        place: a round's keys are at most its 2,000 intents, its starts far slower."""
        while self.holding < self.limit:
            free = [key for key in self.waiting if self._free(key)]
            if not free:
                return
            key = min(free, key=lambda k: self.served.get(k, 0))
            queue = self.waiting[key]
            granted = queue.popleft()
            if not queue:
                del self.waiting[key]
            self._take(key)
            granted.set_result(None)
