"""What routes depend on: a connection of the app's pool for the request, the settings."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from api.settings import ApiSettings


def pool(request: Request) -> AsyncConnectionPool:
    return request.app.state.pool


def settings(request: Request) -> ApiSettings:
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
