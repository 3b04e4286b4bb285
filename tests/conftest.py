"""Session-wide real servers: one PostgreSQL and one Temporal dev server per test run.

Fixtures and hooks only: helpers live in `tests/helpers/`, which test modules import.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from temporalio.client import Client

from core.payloads import data_converter
from devstack import EmbeddedPostgres, TemporalDevServer, free_port
from tests.helpers import ROOT, TEMPLATE_DB
from tests.helpers.worker import WorkerProcess, settings_env
from tests.integration.chunk_gate import ChunkGate
from worker.migrate import apply_migrations
from worker.settings import Settings

# Session fixtures kept beside their helpers: the installed wheel's venv, built once.
pytest_plugins = ["tests.helpers.wheel"]


def pytest_configure(config) -> None:
    """Keep this checkout's temporary files under a root of its own.

    Every pytest session re-locks `/tmp/pytest-of-<user>` to mode 0700 when it starts, and
    the embedded PostgreSQL runs as its own user, which must traverse into its data
    directory: a test session of another checkout on the same machine would cut this
    session's servers off ("could not access directory: Permission denied").
    """
    if "PYTEST_DEBUG_TEMPROOT" not in os.environ:
        digest = hashlib.sha256(str(ROOT).encode()).hexdigest()[:8]
        root = Path(tempfile.gettempdir()) / f"sj-{digest}"  # short: a socket path has 107 bytes
        root.mkdir(mode=0o755, exist_ok=True)
        os.environ["PYTEST_DEBUG_TEMPROOT"] = str(root)


_db_numbers = itertools.count()


@pytest.fixture(scope="session")
def service_tmp() -> Iterator[Path]:
    """A directory for PostgreSQL clusters, outside pytest's own temporary directories.

    Run as root, PostgreSQL runs as a service user, which must be able to reach its data
    directory for as long as it runs. Every pytest session that starts (another engineer's
    on the same machine, say) makes its user's `/tmp/pytest-of-<user>` private again, and a
    server whose data lives below it dies at its next checkpoint ("could not open file
    .../global/pg_control: Permission denied"). So the data lives here instead.
    """
    path = Path(tempfile.mkdtemp(prefix="scheduled-jobs-tests-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres(service_tmp: Path) -> Iterator[EmbeddedPostgres]:
    server = EmbeddedPostgres(service_tmp / "pg" / "data", free_port())
    server.start()
    server.create_database(TEMPLATE_DB)
    apply_migrations(server.url(TEMPLATE_DB))
    yield server
    server.stop("immediate")


@pytest.fixture
def database_url(postgres: EmbeddedPostgres) -> str:
    """A fresh, fully migrated database for one test, cloned from the template."""
    return postgres.create_database(f"test_{next(_db_numbers)}", template=TEMPLATE_DB)


@pytest.fixture
def db(database_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        yield conn


@pytest.fixture(scope="session")
async def temporal(tmp_path_factory) -> TemporalDevServer:
    logs = tmp_path_factory.mktemp("temporal")
    # With its Web UI: tests/integration/test_web_ui.py drives it in a browser.
    server = TemporalDevServer(free_port(), free_port(), None, logs / "temporal.log")
    server.start()
    try:
        await server.wait_ready()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
async def client(temporal: TemporalDevServer) -> Client:
    return await Client.connect(temporal.address, data_converter=data_converter)


@pytest.fixture
def task_queue() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def settings(temporal: TemporalDevServer, database_url: str, task_queue: str) -> Settings:
    return Settings(
        temporal_address=temporal.address,
        temporal_task_queue=task_queue,
        database_url=database_url,
        worker_graceful_shutdown_seconds=30,
    )


@pytest.fixture
def start_workers(settings: Settings, tmp_path: Path):
    """Start `n` worker processes on the test's task queue; all are stopped at teardown."""
    started: list[WorkerProcess] = []

    def start(n: int, **env: str) -> list[WorkerProcess]:
        batch = [
            WorkerProcess(
                settings_env(settings, **env), tmp_path / f"worker-{len(started) + i}.log"
            )
            for i in range(n)
        ]
        started.extend(batch)
        for proc in batch:
            proc.wait_ready()
        return batch

    yield start
    for proc in started:
        proc.stop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """In CI (`CI` set, as `.ci/run` does), a skipped test fails: a tool it needs is missing.
    A failed test is marked `call_failed` for its fixtures' teardown.

    What CI never runs protects nothing; `.ci/run` installs every tool a test drives.
    """
    report = yield
    if report.when == "call" and report.failed:
        item.call_failed = True  # fixtures that keep evidence (screenshots) read it
    if report.skipped and os.environ.get("CI") and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"skipped in CI, which must run every test: {reason}"
    return report


@pytest.fixture
def gate(database_url: str) -> Iterator[ChunkGate]:
    """The chunk gate, closed: the test's workers wait before each chunk until it steps or
    opens it (`tests/integration/chunk_gate.py`)."""
    gate = ChunkGate(database_url)
    yield gate
    gate.close()


_exit_status: list[int] = []


def pytest_sessionfinish(session, exitstatus) -> None:
    _exit_status.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config) -> None:
    """Leave without interpreter teardown, as the entry points do (see worker/process.py).

    The session's Temporal client leaves SDK threads that can abort finalisation and turn
    a green run into SIGABRT; the report is printed and the status is known by now.
    """
    if _exit_status:
        from worker.process import exit_process

        exit_process(_exit_status[-1])
