"""Running a docs page's Python example as written, on a test's database."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT


def run_python_example(page: Path, database_url: str) -> subprocess.CompletedProcess:
    """The page's one ```python block, run in a fresh interpreter from the checkout with
    `DATABASE_URL` set to the test's database (no other database or quota setting)."""
    (block,) = re.findall(r"^```python\n(.*?)^```$", page.read_text(), re.MULTILINE | re.DOTALL)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "TENANT_"))}
    return subprocess.run(
        [sys.executable, "-c", block],
        cwd=ROOT,
        env=env | {"DATABASE_URL": database_url},
        capture_output=True,
        text=True,
        timeout=120,
    )
