"""What the server calls need of their caller: a Temporal client and a retry policy."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from temporalio.client import Client

T = TypeVar("T")


class Connection(Protocol):
    """A Temporal client made on first use, and the retries around each call (the CLI's
    `Context` is one)."""

    async def client(self) -> Client: ...

    async def retrying(self, call: Callable[[], Awaitable[T]]) -> T: ...
