"""The HTTP API on `make run`'s stack: `python -m api serve` beside the workers, and a key
for the demo tenant kept in the state directory.

The demo gives each of its 1,000 customers a tenant (`customer-0001`, ...) and a
`weekly-report` runtime schedule (devstack/demo.py); the key printed at start is
`customer-0001`'s. It is created on the first start and kept in `<state>/api-key` (mode
0600, like the database beside it): the next start prints the same key, so a script
written against it keeps working. A key revoked meanwhile (`python -m api keys revoke`),
or a state whose database was replaced, gets a new one.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from api import keys
from core.errors import SchedulerError
from devstack.processes import stop_process

DEMO_TENANT = "customer-0001"
KEY_FILE = "api-key"
READY_SECONDS = 60


class ApiProcess:
    """`python -m api serve` on 127.0.0.1:`port`, its output prefixed `api |`."""

    def __init__(self, port: int):
        self.port = port
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, env: dict[str, str]) -> None:
        """Start the server and return once `/readyz` answers 200 (its pool reaches the
        database); a server that exits first raises one line with its exit code."""
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "api", "serve"],
            env=env | {"API_HOST": "127.0.0.1", "API_PORT": str(self.port)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # Ctrl-C reaches it as our SIGTERM, after the workers
        )
        threading.Thread(target=_pipe, args=(self.proc.stdout,), daemon=True).start()
        deadline = time.monotonic() + READY_SECONDS
        while not self._ready():
            if self.proc.poll() is not None:
                raise SchedulerError(f"the API exited with code {self.proc.returncode} at start")
            if time.monotonic() > deadline:
                raise SchedulerError(f"the API on {self.url} was not ready in {READY_SECONDS}s")
            time.sleep(0.2)  # a start-up poll of a process, not a test's synchronisation

    def _ready(self) -> bool:
        try:
            return httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def stop(self) -> None:
        if self.proc is not None:  # uvicorn finishes the requests in flight, then exits
            stop_process(self.proc, 30)


def _pipe(stream) -> None:
    for line in stream:
        sys.stdout.write(f"api | {line}")
        sys.stdout.flush()


async def demo_key(url: str, state: Path) -> tuple[str, bool]:
    """The demo tenant's key: the one kept in `state`, if it still authenticates as that
    tenant, else a new one (written there); and whether it is new."""
    path = state / KEY_FILE
    if path.exists():
        kept = path.read_text().strip()
        caller = await keys.authenticate(url, kept)
        if caller is not None and caller.tenant == DEMO_TENANT:
            return kept, False
    _, key = await keys.create(url, tenant=DEMO_TENANT, by="devstack", note="make run's demo key")
    path.touch(mode=0o600)
    path.write_text(key + "\n")
    return key, True
