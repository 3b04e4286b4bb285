"""Helpers shared by the tests: poll with a deadline instead of sleeping, the checkout's root.

Test modules import helpers from here (`tests.helpers`, `tests.helpers.worker`), never
from `tests/conftest.py`, which holds only fixtures and hooks (checked by
`tests/unit/test_architecture.py`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[2]
"""The checkout: where `python -m worker` and `python -m schedules` run from."""

TEMPLATE_DB = "jobs_template"
"""The migrated database every test's database is cloned from (`tests/conftest.py`)."""


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
    path, text: str | tuple[str, ...], timeout: float = 30.0, interval: float = 0.1
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


def run_python_walkthrough(page: Path, database_url: str) -> list[str]:
    """Run a docs page's one Python block as written, on `database_url`; its output lines.
    Fails the test, with its stderr, if it does not exit 0."""
    done = run_python_block(page, {"DATABASE_URL": database_url})
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def run_python_block(page: Path, env: dict[str, str]):
    """Run a docs page's one Python block as written, with `env` and no other `DATABASE_*`
    or `TENANT_*` variable; the finished process."""
    import os
    import re
    import subprocess
    import sys

    (block,) = re.findall(r"^```python\n(.*?)^```$", page.read_text(), re.MULTILINE | re.DOTALL)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "TENANT_"))}
    return subprocess.run(
        [sys.executable, "-c", block],
        cwd=ROOT,
        env=clean | env,
        capture_output=True,
        text=True,
        timeout=120,
    )
