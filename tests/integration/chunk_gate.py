"""The test's side of the chunk gate (`activities/chunks/gate.py`): a run that waits before
its next chunk until the test lets it go, so a signal lands where the test wants it."""

from __future__ import annotations

import psycopg

from tests.helpers import assert_eventually

# Any bigint: advisory locks are per database, and every test has its own database.
KEY = 815_001


class ChunkGate:
    """Closed while this holds the gate's advisory lock on a connection of its own."""

    env = {"WORKER_TEST_CHUNK_GATE": str(KEY)}  # for the workers: gate every chunk

    def __init__(self, database_url: str) -> None:
        self._conn = psycopg.connect(database_url, autocommit=True)
        self._conn.execute("SELECT pg_advisory_lock(%s)", (KEY,))

    @property
    def backend_pid(self) -> int:
        """The PostgreSQL session that holds the gate (a fault must spare it)."""
        return self._conn.info.backend_pid

    def waiting(self) -> int:
        """How many attempts wait at the gate now."""
        return self._conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            " AND classid = 0 AND objid = %s AND objsubid = 1"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            (KEY,),
        ).fetchone()[0]

    async def reached(self, attempts: int = 1, timeout: float = 60.0) -> None:
        """Wait until `attempts` attempts wait at the gate."""

        async def arrived():
            assert self.waiting() >= attempts

        await assert_eventually(arrived, timeout=timeout, interval=0.02)

    def step(self) -> None:
        """Let each waiting attempt through one chunk; it waits again before the next.

        The lock is released and asked for again in one statement: the waiting requests,
        first in the lock's queue, are granted, this one queues behind them, and the next
        request of each attempt queues behind this one.
        """
        self._conn.execute("SELECT pg_advisory_unlock(%s), pg_advisory_lock(%s)", (KEY, KEY))

    def open(self) -> None:
        self._conn.execute("SELECT pg_advisory_unlock_all()")

    def close(self) -> None:
        self.open()
        self._conn.close()
