"""Helpers shared by the tests: poll with a deadline instead of sleeping (`devstack.testing`,
which users' tests get too), the checkout's root.

Test modules import helpers from here (`tests.helpers`, `tests.helpers.worker`), never
from `tests/conftest.py`, which holds only fixtures and hooks (checked by
`tests/unit/test_architecture.py`).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from devstack.testing import TEMPLATE_DB
from devstack.testing.polling import assert_eventually, wait_for_text

__all__ = [
    "ROOT",
    "TEMPLATE_DB",
    "assert_eventually",
    "python_m",
    "run_python_block",
    "run_python_walkthrough",
    "wait_for_text",
]

ROOT = Path(__file__).resolve().parents[2]
"""The checkout: where `python -m worker` and `python -m schedules` run from."""


def python_m(
    argv: list[str], env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess:
    """`python -m ARGV` from the checkout with exactly `env`, output captured as text.
    Raises `TimeoutExpired` after `timeout` seconds (the command hung)."""
    return subprocess.run(
        [sys.executable, "-m", *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


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
