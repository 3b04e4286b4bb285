"""`make run`'s edges (issue 43, item 4): a state directory another stack holds, and
Ctrl-C while the stack starts. Each test runs `python -m devstack` on its own state
directory and spare ports."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from devstack import free_port
from devstack.ports import require_free_port
from devstack.postgres import EmbeddedPostgres
from tests.helpers import ROOT, wait_for_text


def devstack(state, ports: list[int]) -> list[str]:
    pg, temporal, ui, smtp, payments, webhooks, api = ports
    return [
        *(sys.executable, "-m", "devstack", f"--state={state}"),
        *(f"--pg-port={pg}", f"--temporal-port={temporal}", f"--ui-port={ui}"),
        *(f"--smtp-port={smtp}", f"--payments-port={payments}", f"--webhook-port={webhooks}"),
        f"--api-port={api}",
    ]


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "DATABASE_"))}


def test_a_state_directory_another_stack_holds_is_refused_in_one_line(service_tmp):
    state = service_tmp / f"held-{free_port()}"
    holder = EmbeddedPostgres(state / "postgres", free_port())  # the other stack's server
    holder.start()
    try:
        second = subprocess.run(
            devstack(state, [free_port() for _ in range(7)]),
            cwd=ROOT,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert second.returncode == 2, second
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1, second.stderr
        assert str(state) in lines[0] and "in use by another stack" in lines[0]
        assert f"port {holder.port}" in lines[0] and "--state" in lines[0]
        assert "Traceback" not in second.stdout + second.stderr
        holder.wait_ready(10)  # left alone
    finally:
        holder.stop("immediate")


def interrupted_at(state, log, ports: list[int], text: str) -> int:
    """Start the stack, Ctrl-C it once `text` is in its output; its exit code."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            devstack(state, ports),
            cwd=ROOT,
            env=clean_env() | {"PYTHONUNBUFFERED": "1"},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for_text(log, text, timeout=120)
        proc.send_signal(signal.SIGINT)
        return proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_ctrl_c_while_the_stack_starts_stops_it_there(service_tmp, tmp_path):
    """Before, start-up ran to its end (synced schedules, workers ready) and only then
    stopped. Now it stops where it is: in a blocking step (initdb, pg_ctl) or an awaited
    one (the Temporal dev server's start), and stops what had started."""
    state = service_tmp / f"interrupted-{free_port()}"
    ports = [free_port() for _ in range(7)]

    first = tmp_path / "first.log"
    assert interrupted_at(state, first, ports, "starting PostgreSQL") == 130
    # The demo data, the Temporal dev server, the sync and the workers never came.
    assert "interrupted while starting" in first.read_text()
    assert "demo billing data" not in first.read_text()

    # Cut short in initdb or not, the state serves the next start.
    second = tmp_path / "second.log"
    assert interrupted_at(state, second, ports, "starting the Temporal dev server") == 130
    text = second.read_text()
    assert "migrations applied" in text and "interrupted while starting" in text
    assert "schedules synced" not in text and "workers ready" not in text
    assert "Traceback" not in first.read_text() + text
    assert not (state / "postgres" / "postmaster.pid").exists()  # PostgreSQL stopped
    for port in ports[:2]:  # PostgreSQL's and Temporal's ports are free again
        require_free_port(port, "a server of the stack")
