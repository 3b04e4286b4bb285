"""Checks that a deploy file's command is one the project's entry points accept."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def help_probe(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m module *args --help`: argparse checks `args` against its choices first."""
    return subprocess.run(
        [sys.executable, "-m", module, *args, "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
