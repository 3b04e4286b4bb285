"""Poll for a condition with a deadline instead of sleeping."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


async def assert_eventually(
    check: Callable[[], Awaitable[T]], timeout: float = 30.0, interval: float = 0.1
) -> T:
    """Call `check` until it stops raising AssertionError; return its value.

    After `timeout` seconds the last AssertionError propagates.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        await asyncio.sleep(interval)


def wait_for_text(
    path: Path, text: str | tuple[str, ...], timeout: float = 30.0, interval: float = 0.1
) -> str:
    """Block until the file at `path` contains `text` (or one of them); return the one found."""
    texts = (text,) if isinstance(text, str) else text
    deadline = time.monotonic() + timeout
    while True:
        content = path.read_text(errors="replace") if path.exists() else ""
        for candidate in texts:
            if candidate in content:
                return candidate
        if time.monotonic() > deadline:
            tail = path.read_text(errors="replace")[-2000:] if path.exists() else "(no file)"
            raise AssertionError(f"{text!r} did not appear in {path} within {timeout}s:\n{tail}")
        time.sleep(interval)
