"""With Temporal or PostgreSQL unreachable, the operator commands say so in one line and return.

The addresses are ports held bound but not listening for the test (connections to them are
refused, and no other process can take them meanwhile). Each command runs under a
subprocess timeout of 20 s: the hang this replaces lasted 60 s, so the bound cannot flake
on a loaded machine and still catches it.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.client import Client

from core.errors import TemporalUnreachableError
from schedules.server.retry import Retry
from schedules.server.state import schedule_states
from tests.helpers import ROOT

BOUND = 20  # seconds: a returned command, however loaded the machine (the old hang was 60)
PASSWORD = "hunter2-fail-fast"


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A local port nothing listens on, held for the test so nothing else takes it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.fixture
def env(closed_port: int) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "DATABASE_"))}
    return base | {
        "TEMPORAL_ADDRESS": f"127.0.0.1:{closed_port}",
        "DATABASE_URL": f"postgresql://ops:{PASSWORD}@127.0.0.1:{closed_port}/jobs",
    }


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.toml"
    path.write_text(
        '[ff-job]\nkind = "invoice-reminders"\ncron = "0 3 * * *"\ntimezone = "UTC"\n'
        'description = "fail-fast test"\n'
    )
    return path


def run(env: dict[str, str], catalog: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "schedules", "--catalog", str(catalog), "--without-engine", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=BOUND,  # raises TimeoutExpired: the command hung
    )


def one_line(done: subprocess.CompletedProcess) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert PASSWORD not in done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "tonic" not in done.stderr, done.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("command", "code"),
    [
        (["list"], 1),
        (["describe", "ff-job"], 1),
        (["verify"], 2),
        (["trigger", "ff-job"], 1),
        (["trigger", "ff-job", "--wait"], 1),
        (["backfill", "ff-job", "--start", "2026-01-01", "--end", "2026-01-03", "--wait"], 1),
        (["backfill", "ff-job", "--start", "2026-01-01", "--end", "2026-01-03"], 1),
        (["pause", "ff-job", "--note", "x"], 1),
        (["resume", "ff-job"], 1),
        (["sync", "--dry-run"], 1),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else str(value),
)
def test_temporal_unreachable_is_one_line_naming_the_address(env, catalog, command, code):
    done = run(env, catalog, *command)
    assert done.returncode == code, done.stderr
    line = one_line(done)
    address = env["TEMPORAL_ADDRESS"]
    assert (
        line == f"error: cannot reach Temporal at {address}: Connection refused (TEMPORAL_ADDRESS)"
    )


def test_runs_with_postgresql_unreachable_is_one_line_naming_host_and_port(
    env, catalog, closed_port
):
    done = run(env, catalog, "runs", "ff-job")
    assert done.returncode == 1
    line = one_line(done)
    assert line.startswith("error: PostgreSQL is unavailable: ")
    assert f'"127.0.0.1", port {closed_port} failed: Connection refused' in line


def test_explain_and_check_cannot_tell_and_exit_2(env, catalog, closed_port):
    explained = run(env, catalog, "explain", "ff-job")
    assert explained.returncode == 2, explained.stderr
    assert "cannot tell" in explained.stdout and PASSWORD not in explained.stdout

    checked = run(env, catalog, "check")
    assert checked.returncode == 2, checked.stderr
    errors = [line for line in checked.stdout.splitlines() if line.startswith("ERROR")]
    assert errors == [
        f'ERROR  cannot read the database: connection failed: connection to server at "127.0.0.1", '
        f"port {closed_port} failed: Connection refused",
        f"ERROR  cannot reach Temporal at 127.0.0.1:{closed_port}: Connection refused",
    ]


@pytest.mark.parametrize(
    "args",
    [
        ["--wait-for-cluster", "1", "sync", "--dry-run"],
        ["sync", "--dry-run", "--wait-for-cluster", "1"],
        ["pause", "ff-job", "--note", "x", "--wait-for-cluster", "1"],
    ],
    ids=" ".join,
)
def test_a_write_waits_for_the_cluster_only_when_asked_and_says_for_what(env, catalog, args):
    done = run(env, catalog, *args)
    assert done.returncode == 1
    address = env["TEMPORAL_ADDRESS"]
    lines = done.stderr.strip().splitlines()
    assert lines == [
        f"waiting up to 1s (--wait-for-cluster) for Temporal at {address} to answer: "
        "Connection refused",
        f"error: cannot reach Temporal at {address} within 1s: Connection refused "
        "(TEMPORAL_ADDRESS)",
    ]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--wait-for-cluster", "5", "list"], "`list` does not wait for a cluster"),
        # After the command the same: global options go either side (issue 20).
        (["list", "--wait-for-cluster", "5"], "`list` does not wait for a cluster"),
        (["runs", "ff-job", "--wait-for-cluster", "5"], "`runs` does not wait for a cluster"),
        (["sync", "--wait-for-cluster", "-1"], "argument --wait-for-cluster:"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)
def test_wait_for_cluster_is_refused_where_waiting_makes_no_sense(env, catalog, args, says):
    done = run(env, catalog, *args)
    assert done.returncode == 2
    assert says in one_line(done)


def test_list_with_temporal_unreachable_is_one_line_every_time(env, tmp_path):
    """Issue 17, point 5: each job's describe is its own task; when the first failed, the
    others were abandoned, and asyncio printed their errors ("exception never retrieved",
    "unhandled exception during asyncio.run() shutdown") after the error line, about one
    run in six."""
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        "".join(
            f'[ff-job-{n}]\nkind = "invoice-reminders"\ncron = "0 3 * * *"\ntimezone = "UTC"\n'
            for n in range(8)
        )
    )
    address = env["TEMPORAL_ADDRESS"]
    for _ in range(10):
        done = run(env, jobs, "list")
        assert done.returncode == 1, done.stderr
        assert one_line(done) == (
            f"error: cannot reach Temporal at {address}: Connection refused (TEMPORAL_ADDRESS)"
        )


async def test_schedule_states_leaves_no_task_behind_when_temporal_is_unreachable(env):
    """The cause of the above, made deterministic: the call returns (here, raises) only
    once every per-job task has finished, so none can fail unheard after it."""
    # A lazy client connects at its first call: each job's call meets the closed port.
    client = await Client.connect(env["TEMPORAL_ADDRESS"], lazy=True)
    retry = Retry(address=env["TEMPORAL_ADDRESS"])
    before = asyncio.all_tasks()
    with pytest.raises(TemporalUnreachableError):
        await schedule_states(client, [f"ff-job-{n}" for n in range(40)], retry=retry)
    left = [task for task in asyncio.all_tasks() - before if not task.done()]
    assert left == []


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A local port that accepts TCP connections (the kernel completes the handshake) and
    never answers a byte, as a hung PostgreSQL or a black-holing proxy does."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield sock.getsockname()[1]


@pytest.mark.parametrize("migrate", ["true", "false"], ids=["migrating", "pool only"])
def test_a_worker_against_a_silent_postgresql_gives_up_in_one_line_naming_it(
    env, temporal, silent_port, migrate
):
    """Issue 17, point 5: psycopg's default connect timeout is 130 s; the worker gave up
    only then. It now bounds each connection like the CLI (5 s), names host and port, and
    exits 1. The subprocess bound (60 s) only catches the old wait, it is no margin."""
    worker_env = env | {
        "TEMPORAL_ADDRESS": temporal.address,
        "TEMPORAL_TASK_QUEUE": f"ff-{silent_port}",
        "DATABASE_URL": f"postgresql://ops:{PASSWORD}@127.0.0.1:{silent_port}/jobs",
        "MIGRATE_ON_START": migrate,
    }
    done = subprocess.run(
        [sys.executable, "-m", "worker"],
        cwd=ROOT,
        env=worker_env,
        capture_output=True,
        text=True,
        timeout=60,  # raises TimeoutExpired: the worker waited psycopg's 130 s
    )
    assert done.returncode == 1, done.stderr
    line = one_line(done)
    assert line.startswith(
        f"error: cannot reach the database at 127.0.0.1:{silent_port} within 5s: "
    )
    assert line.endswith("(DATABASE_URL, DATABASE_CONNECT_TIMEOUT_SECONDS)")
