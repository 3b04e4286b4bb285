"""`make run`'s edges (issue 43, item 4): a state directory another stack holds, and
Ctrl-C while the stack starts. Each test runs `python -m devstack` on its own state
directory and spare ports."""

from __future__ import annotations

import os
import subprocess
import sys

from devstack import free_port
from devstack.postgres import EmbeddedPostgres
from tests.helpers import ROOT


def devstack(state, ports: list[int]) -> list[str]:
    pg, temporal, ui, smtp, payments, webhooks = ports
    return [
        *(sys.executable, "-m", "devstack", f"--state={state}"),
        *(f"--pg-port={pg}", f"--temporal-port={temporal}", f"--ui-port={ui}"),
        *(f"--smtp-port={smtp}", f"--payments-port={payments}", f"--webhook-port={webhooks}"),
    ]


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "DATABASE_"))}


def test_a_state_directory_another_stack_holds_is_refused_in_one_line(service_tmp):
    state = service_tmp / f"held-{free_port()}"
    holder = EmbeddedPostgres(state / "postgres", free_port())  # the other stack's server
    holder.start()
    try:
        second = subprocess.run(
            devstack(state, [free_port() for _ in range(6)]),
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
