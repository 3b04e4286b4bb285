"""A real `python -m worker` replica for tests, from the checkout, and the environment a
subprocess needs (one implementation: `devstack.testing`, which users' tests get too)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from devstack.testing.worker import WorkerProcess as _WorkerProcess
from devstack.testing.worker import settings_env
from tests.helpers import ROOT, python_m
from worker.settings import Settings

__all__ = ["WorkerProcess", "schedules_cli", "schedules_said", "settings_env"]


def schedules_cli(
    settings: Settings,
    *args: str,
    catalog: Path | None = None,
    timeout: float = 120,
    **env: str,
) -> subprocess.CompletedProcess:
    """`python -m schedules ARGS` against the test's servers, output captured; `catalog`:
    that file's jobs alone (`--catalog FILE --without-engine`); `env`: variables to set.
    Raises `TimeoutExpired` after `timeout` seconds (the command hung)."""
    alone = ["--catalog", str(catalog), "--without-engine"] if catalog is not None else []
    return python_m(["schedules", *alone, *args], settings_env(settings, **env), timeout)


def schedules_said(
    settings: Settings, *args: str, catalog: Path | None = None, **env: str
) -> tuple[int, str]:
    """`schedules_cli`'s exit code and output (stdout, then stderr); it printed no traceback."""
    done = schedules_cli(settings, *args, catalog=catalog, **env)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout + done.stderr


class WorkerProcess(_WorkerProcess):
    """`devstack.testing.WorkerProcess`, run from the checkout unless `cwd` says otherwise."""

    def __init__(
        self, env: dict[str, str], log: Path, python: str | Path = sys.executable, cwd: Path = ROOT
    ) -> None:
        super().__init__(env, log, python, cwd)
