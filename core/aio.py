"""Bounded concurrency for calls made one per key (a schedule, a workflow)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


async def gather_by(
    keys: Sequence[K], call: Callable[[K], Awaitable[V]], *, limit: int
) -> dict[K, V]:
    """`call(key)` for every key, at most `limit` at a time; the results by key.

    Returns (or raises the first error) only when every call has finished, so none is left
    to fail unheard as the caller moves on."""
    semaphore = asyncio.Semaphore(limit)

    async def one(key: K) -> V:
        async with semaphore:
            return await call(key)

    results = await asyncio.gather(*(one(key) for key in keys), return_exceptions=True)
    failed = next((r for r in results if isinstance(r, BaseException)), None)
    if failed is not None:
        raise failed
    return dict(zip(keys, results, strict=True))  # type: ignore[arg-type]
