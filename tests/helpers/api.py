"""The HTTP API, live, for tests: uvicorn on a free port in a thread of the test process
(real sockets, the real app and pool), and an httpx client per key."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx
import uvicorn

from api import keys
from api.app import create_app
from api.settings import ApiSettings
from devstack.ports import free_port
from devstack.testing.polling import assert_eventually


@dataclass(frozen=True)
class LiveApi:
    """A serving API: its base URL and its database."""

    url: str
    database_url: str

    async def key(self, tenant: str | None) -> str:
        """A new key of `tenant` (None: the operator role)."""
        _, key = await keys.create(self.database_url, tenant=tenant, by="test")
        return key

    def client(self, key: str | None) -> httpx.Client:
        """A client of the API sending `key` (None: no Authorization header)."""
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


@asynccontextmanager
async def serving(settings: ApiSettings) -> AsyncIterator[LiveApi]:
    """Serve `create_app(settings)` on a free port until the block ends."""
    port = free_port()
    config = uvicorn.Config(
        create_app(settings), host="127.0.0.1", port=port, log_config=None, lifespan="on"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"api-{port}", daemon=True)
    thread.start()
    try:

        async def started() -> None:
            assert thread.is_alive(), "the API stopped while starting (its log says why)"
            assert server.started, "the API has not started yet"

        await assert_eventually(started, timeout=60)
        yield LiveApi(f"http://127.0.0.1:{port}", settings.database_url.get_secret_value())
    finally:
        server.should_exit = True
        thread.join(timeout=30)
