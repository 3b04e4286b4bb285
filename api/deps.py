"""What routes depend on: a connection of the app's pool for the request, the settings,
and the app's Temporal client (connected on first use)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from temporalio.client import Client

from api.settings import ApiSettings
from worker.client import connect

# No page waits longer than this for a Temporal that does not answer the connection.
CONNECT_SECONDS = 5.0


async def pool(request: Request) -> AsyncConnectionPool:
    return request.app.state.pool


async def settings(request: Request) -> ApiSettings:
    return request.app.state.settings


async def connection(
    pool: Annotated[AsyncConnectionPool, Depends(pool)],
) -> AsyncIterator[AsyncConnection]:
    """One connection of the pool for the whole request: the key check and the library
    call (each in its own transaction) share it, and it goes back when the request ends."""
    async with pool.connection() as conn:
        yield conn


Conn = Annotated[AsyncConnection, Depends(connection)]
Settings = Annotated[ApiSettings, Depends(settings)]
Pool = Annotated[AsyncConnectionPool, Depends(pool)]


async def temporal_client(request: Request) -> Client:
    """The app's one Temporal client (`TEMPORAL_*` settings, as the worker connects),
    connected by the first request that needs it, so the API starts and serves its
    PostgreSQL routes while Temporal is down. A failed connection is not kept: the next
    request tries again. Raises the SDK's `RuntimeError` (or `TimeoutError`) when
    Temporal cannot be reached."""
    state = request.app.state
    if getattr(state, "temporal", None) is None:
        if getattr(state, "temporal_lock", None) is None:
            state.temporal_lock = asyncio.Lock()
        async with state.temporal_lock:  # one connection for concurrent first requests
            if getattr(state, "temporal", None) is None:
                settings: ApiSettings = state.settings
                state.temporal = await asyncio.wait_for(connect(settings), CONNECT_SECONDS)
    return state.temporal


Temporal = Annotated[Client, Depends(temporal_client)]
