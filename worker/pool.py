"""The process's connection pool: the worker's, and the API's (`api.app`)."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from core.sql import queries
from worker.settings import Settings

_Q = queries("worker.sql", "pool")


def connection_pool(settings: Settings, **options: Any) -> AsyncConnectionPool:
    """The process's pool of `DATABASE_URL` connections (`DATABASE_POOL_SIZE` at most),
    each configured on connect (`worker/sql/pool.sql`); not yet open (`async with` opens
    it). The worker's, and the API's (`api.app`)."""
    idle_ms = int(settings.database_idle_in_transaction_timeout_seconds * 1000)

    async def configure(conn: AsyncConnection) -> None:
        await conn.execute(_Q["configure"], {"idle_ms": str(idle_ms)})
        await conn.commit()

    return AsyncConnectionPool(
        settings.database_conninfo,
        min_size=1,
        max_size=settings.database_pool_size,
        configure=configure,
        open=False,
        **options,
    )
