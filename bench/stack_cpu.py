"""CPU seconds used by the benchmark's PostgreSQL and Temporal dev server, from /proc.

Wall time on a shared machine moves with whatever else runs; the CPU a piece of work costs
moves much less. The job's cost is this process's CPU (the worker) plus the servers' CPU
while it runs: PostgreSQL's postmaster with every live backend and background process
(exited ones are in the postmaster's children totals) and the Temporal dev server.
"""

from __future__ import annotations

import os
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may hold spaces: split after it.
    return text[text.rindex(")") + 2 :].split()


def _cpu(fields: list[str], children: bool) -> float:
    # After the name: state is field 3, utime 14, stime 15, cutime 16, cstime 17.
    utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
    return (utime + stime + ((cutime + cstime) if children else 0)) / _TICK


def tree_cpu(root: int) -> float:
    """CPU seconds of `root` (with its reaped children) and of its live child processes."""
    fields = _stat(root)
    if fields is None:
        return 0.0
    total = _cpu(fields, children=True)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (child := _stat(int(entry.name))) and int(child[1]) == root:
            total += _cpu(child, children=False)
    return total


def postmaster_pid(data_directory: str) -> int:
    return int(Path(data_directory, "postmaster.pid").read_text().split()[0])


def temporal_pid(port: int) -> int | None:
    """The `temporal server start-dev` listening on `port`, found by its command line."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"start-dev" in args and b"--port" in args and str(port).encode() in args:
            return int(entry.name)
    return None


class StackCpu:
    """Reads the servers' CPU totals; `used()` is the CPU since the last `start()`."""

    def __init__(self, data_directory: str, temporal_port: int) -> None:
        self.postgres = postmaster_pid(data_directory)
        self.temporal = temporal_pid(temporal_port)
        self._start = (0.0, 0.0)

    def read(self) -> tuple[float, float]:
        return tree_cpu(self.postgres), tree_cpu(self.temporal) if self.temporal else 0.0

    def start(self) -> None:
        self._start = self.read()

    def used(self) -> tuple[float, float]:
        postgres, temporal = self.read()
        return postgres - self._start[0], temporal - self._start[1]

    @classmethod
    def of(cls, database_url: str, temporal_address: str) -> StackCpu:
        """The servers behind a database URL and a Temporal `host:port`."""
        import psycopg

        with psycopg.connect(database_url) as conn:
            (data_directory,) = conn.execute("SHOW data_directory").fetchone()
        return cls(data_directory, int(temporal_address.rpartition(":")[2]))
