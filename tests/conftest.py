"""Session-wide real servers: one PostgreSQL and one Temporal dev server per test run.

The servers, databases, task queues, settings and workers are the fixtures every user of
the package gets (`devstack.pytest_plugin`, docs/testing.md): this suite runs on the same
ones. Fixtures and hooks only: helpers live in `tests/helpers/`, which test modules import.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

import pytest
from psycopg_pool import AsyncConnectionPool

from api.settings import ApiSettings
from tests.helpers.api import LiveApi, serving
from tests.integration.chunk_gate import ChunkGate

# The servers and workers (the package's plugin, which users get too); the wheel and its
# venv, built once per session.
pytest_plugins = ["devstack.pytest_plugin", "tests.helpers.wheel"]


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


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[AsyncConnectionPool]:
    """A connection pool on the test's database, open, for activities built in the test."""
    async with AsyncConnectionPool(database_url, min_size=1, max_size=4, open=False) as pool:
        await pool.wait()
        yield pool


@pytest.fixture
async def api(database_url: str) -> AsyncIterator[LiveApi]:
    """The HTTP API serving the test's database on a free port (`tests/helpers/api.py`)."""
    async with serving(ApiSettings(database_url=database_url)) as live:
        yield live
