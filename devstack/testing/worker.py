"""A real `python -m worker` replica for tests, and the environment a subprocess needs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from devstack.processes import stop_process
from devstack.testing.polling import wait_for_text
from worker.settings import Settings


def settings_env(settings: Settings, **extra: str) -> dict[str, str]:
    """The environment a subprocess needs to see `settings` (this one's, without its
    `TEMPORAL_*` and `DATABASE_*`), with `extra` on top."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "DATABASE_"))}
    env.update(
        TEMPORAL_ADDRESS=settings.temporal_address,
        TEMPORAL_NAMESPACE=settings.temporal_namespace,
        TEMPORAL_TASK_QUEUE=settings.temporal_task_queue,
        DATABASE_URL=settings.database_url.get_secret_value(),
        WORKER_GRACEFUL_SHUTDOWN_SECONDS=str(settings.worker_graceful_shutdown_seconds),
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


class WorkerProcess:
    """A real `python -m worker` replica, its output in a log file.

    By default this interpreter's, from the current directory; `python` and `cwd` run
    another install's (tests/integration/test_installed_wheel.py: the wheel's, from
    elsewhere).
    """

    def __init__(
        self,
        env: dict[str, str],
        log: Path,
        python: str | Path = sys.executable,
        cwd: Path | None = None,
    ) -> None:
        self.log = log
        self._out = log.open("wb")
        self.process = subprocess.Popen(
            [str(python), "-m", "worker"],
            cwd=cwd,
            env=env,
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Block until the worker polls its task queues (it says `worker ready`)."""
        wait_for_text(self.log, "worker ready", timeout)

    def signal(self, sig: int) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM (it drains its in-flight work), SIGKILL after `timeout`; its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # a stopped process cannot drain
        code = stop_process(self.process, timeout)
        self._out.close()
        return code
