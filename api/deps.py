"""What routes depend on: a connection of the app's pool for the request, the settings,
and a Temporal client (connected on first use)."""

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


async def temporal_client(request: Request) -> Client:
    """The app's Temporal client, connected from the settings (`TEMPORAL_ADDRESS`,
    `TEMPORAL_NAMESPACE`, TLS, API key: `worker.client.connect`) on the first request that
    needs it and shared after. The API serves without Temporal: only the pages that read
    it (the health page's `check`) connect, and a server that does not answer fails that
    request, not the app's start. A failed connect is tried again by the next request."""
    state = request.app.state
    if getattr(state, "temporal_client", None) is None:
        if getattr(state, "temporal_lock", None) is None:  # no await between: one lock
            state.temporal_lock = asyncio.Lock()
        async with state.temporal_lock:
            if getattr(state, "temporal_client", None) is None:
                state.temporal_client = await connect(state.settings)
    return state.temporal_client


Conn = Annotated[AsyncConnection, Depends(connection)]
Settings = Annotated[ApiSettings, Depends(settings)]
Pool = Annotated[AsyncConnectionPool, Depends(pool)]
Temporal = Annotated[Client, Depends(temporal_client)]
