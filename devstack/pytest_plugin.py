"""The pytest plugin for testing scheduled jobs on real servers (docs/testing.md).

Enable it in a project's top `conftest.py` (it is not registered by itself):

    pytest_plugins = ["devstack.pytest_plugin"]

It needs the `[local]` extra (the servers), pytest and pytest-asyncio (`asyncio_mode =
"auto"`, session-scoped loop). Per test session: one PostgreSQL (`postgres`) holding a
template database migrated as `python -m worker migrate` migrates (the engine's migrations,
then every installed job family's), and one Temporal dev server (`temporal`, `client`).
Per test: a fresh database cloned from the template (`database_url`, `db`), a fresh task
queue (`task_queue`), the `settings` of both, real `python -m worker` processes on them
(`start_workers`, `worker`), the catalog's schedules (`synced`, paused) and the audit's
verdict (`audited`, `runtime_audited`). This repository's own tests run on the same fixtures.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from temporalio.client import Client
from temporalio.service import RPCError

from core.payloads import data_converter
from devstack.ports import free_port
from devstack.postgres import EmbeddedPostgres
from devstack.temporal import TemporalDevServer
from devstack.testing import TEMPLATE_DB
from devstack.testing.audit import audited as audit_clean
from devstack.testing.audit import runtime_audited as runtime_audit_clean
from devstack.testing.worker import WorkerProcess, settings_env
from schedules import AuditReport, JobSpec, apply_sync, load_catalog
from worker.migrate import apply_migrations
from worker.settings import Settings

CATALOG_FILE = "catalog.toml"
"""The catalog `synced` reads, in the project's root, unless `SCHEDULES_CATALOG` names one."""


def pytest_configure(config: pytest.Config) -> None:
    """Keep this project's temporary files under a root of its own.

    Every pytest session re-locks `/tmp/pytest-of-<user>` to mode 0700 when it starts, and
    the embedded PostgreSQL runs as its own user (when run as root), which must traverse
    into its data directory: a test session of another checkout on the same machine would
    cut this session's servers off ("could not access directory: Permission denied").
    """
    if "PYTEST_DEBUG_TEMPROOT" not in os.environ:
        digest = hashlib.sha256(str(config.rootpath).encode()).hexdigest()[:8]
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
    """The session's PostgreSQL, with `TEMPLATE_DB` migrated as `worker migrate` does."""
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
    """A connection to the test's database, in autocommit."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        yield conn


@pytest.fixture(scope="session")
async def temporal(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[TemporalDevServer]:
    """The session's Temporal dev server (in memory), with its Web UI."""
    logs = tmp_path_factory.mktemp("temporal")
    server = TemporalDevServer(free_port(), free_port(), None, logs / "temporal.log")
    server.start()
    try:
        await server.wait_ready()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
async def client(temporal: TemporalDevServer) -> Client:
    """A client of the dev server's default namespace, with the pydantic data converter."""
    return await Client.connect(temporal.address, data_converter=data_converter)


@pytest.fixture
def task_queue() -> str:
    """A task queue of the test's own: only its workers take its runs."""
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def settings(temporal: TemporalDevServer, database_url: str, task_queue: str) -> Settings:
    """The settings of the test's servers, database and task queue (`settings_env(settings)`
    is the environment a `python -m worker` or `python -m schedules` of them needs)."""
    return Settings(
        temporal_address=temporal.address,
        temporal_task_queue=task_queue,
        database_url=database_url,
        worker_graceful_shutdown_seconds=30,
    )


@pytest.fixture
def start_workers(
    settings: Settings, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., list[WorkerProcess]]]:
    """`start_workers(n, **env)`: start `n` real `python -m worker` processes on the test's
    settings (and `env`), from the project's root, once each is ready; all are stopped
    (SIGTERM, they drain) at teardown."""
    started: list[WorkerProcess] = []

    def start(n: int, **env: str) -> list[WorkerProcess]:
        batch = [
            WorkerProcess(
                settings_env(settings, **env),
                tmp_path / f"worker-{len(started) + i}.log",
                cwd=request.config.rootpath,
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


@pytest.fixture
def worker(start_workers: Callable[..., list[WorkerProcess]]) -> WorkerProcess:
    """One real worker on the test's task queue, ready."""
    (proc,) = start_workers(1)
    return proc


@pytest.fixture
def catalog_path(request: pytest.FixtureRequest) -> Path | None:
    """The catalog `synced` syncs: `SCHEDULES_CATALOG`, else `catalog.toml` in the project's
    root, else the packaged one (None). Override the fixture to name another."""
    named = os.environ.get("SCHEDULES_CATALOG")
    if named:
        return Path(named)
    found = request.config.rootpath / CATALOG_FILE
    return found if found.is_file() else None


@pytest.fixture
async def synced(
    client: Client, task_queue: str, catalog_path: Path | None
) -> AsyncIterator[tuple[JobSpec, ...]]:
    """Every job of the catalog synced to the test's task queue, paused: nothing fires by
    the clock, a trigger or a backfill still runs (`devstack.testing.run_now`). Their
    schedules are deleted at teardown. The jobs, as the catalog defines them."""
    jobs = tuple(
        job.model_copy(update={"paused": True, "note": "test: triggered runs only"})
        for job in load_catalog(catalog_path)
    )
    await apply_sync(client, jobs, task_queue, prune=False)
    try:
        yield jobs
    finally:
        for job in jobs:
            try:
                await client.get_schedule_handle(job.id).delete()
            except RPCError:
                pass  # deleted by the test itself


@pytest.fixture
def audited(
    client: Client, database_url: str, task_queue: str
) -> Callable[..., Awaitable[AuditReport]]:
    """`await audited(jobs, start=...)`: assert the audit of `jobs` over the scheduled times
    from `start` finds nothing, on the test's servers (`devstack.testing.audited` says
    what else it takes)."""

    def judge(jobs: Sequence[Any], *, start: datetime, **options: Any) -> Awaitable[AuditReport]:
        return audit_clean(client, database_url, task_queue, jobs, start=start, **options)

    return judge


@pytest.fixture
def runtime_audited(
    client: Client, database_url: str, task_queue: str
) -> Callable[..., Awaitable[Any]]:
    """`await runtime_audited(start, end)`: assert the audit of the runtime schedules'
    slots in [start, end) on the test's servers finds nothing
    (`devstack.testing.runtime_audited` says what else it takes)."""

    def judge(start: datetime, end: datetime, **options: Any) -> Awaitable[Any]:
        return runtime_audit_clean(database_url, client, task_queue, start, end, **options)

    return judge


_exit_status: list[int] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _exit_status.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Leave without interpreter teardown, as the entry points do (see worker/process.py).

    The session's Temporal client leaves SDK threads that can abort finalisation and turn
    a green run into SIGABRT; the report is printed and the status is known by now.
    """
    if _exit_status:
        from worker.process import exit_process

        exit_process(_exit_status[-1])
