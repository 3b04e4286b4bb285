"""What the deploy tests (compose, Kubernetes) check files against: the entry points and the
Temporal versions of the dev server that `make run` and the tests use."""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from pathlib import Path

from devstack.temporal import temporal_binary

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


@functools.cache
def dev_server_versions() -> dict[str, str]:
    """The Temporal server and UI versions inside the dev server (`temporal --version`)."""
    out = subprocess.run(
        [temporal_binary(), "--version"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    found = dict(re.findall(r"\b(Server|UI) (\d+\.\d+\.\d+)", out))
    assert set(found) == {"Server", "UI"}, out
    return found
