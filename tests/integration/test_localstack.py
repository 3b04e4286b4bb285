"""`make run`'s stack, started as README.md says, on spare ports; the docs' blocks written
for it (`<!-- runnable on make run: ... -->`, tests/helpers/docs.py) run on it as written."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import httpx
import psycopg
import pytest

from devstack import free_port
from devstack.api import DEMO_TENANT
from devstack.temporal import temporal_binary
from schedules.catalog.model import load_catalog
from tests.helpers import ROOT, assert_eventually, wait_for_text
from tests.helpers.docs import marked

# Two starts of the whole stack (PostgreSQL, Temporal, the workers, the API), the docs'
# walks and an audit: on a loaded 2-core machine more than the default 300 s.
pytestmark = pytest.mark.timeout(600)


def start_stack(state, log, ports) -> subprocess.Popen:
    pg, temporal, ui, smtp, payments, webhooks, api = ports
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "DATABASE_"))}
    with log.open("wb") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "devstack",
                f"--state={state}",
                f"--pg-port={pg}",
                f"--temporal-port={temporal}",
                f"--ui-port={ui}",
                f"--smtp-port={smtp}",
                f"--payments-port={payments}",
                f"--webhook-port={webhooks}",
                f"--api-port={api}",
            ],
            cwd=ROOT,
            env=env | {"PYTHONUNBUFFERED": "1"},
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def local_years(instant: datetime) -> set[tuple[str, int]]:
    """The year `instant` is in, in UTC and in each zone of the shipped catalog: a sync's
    clock reaches the schedules it writes through these alone (a UTC-compiled spec covers
    its zone's years from the clock's on; a run's alert threshold, that year's and the
    next's)."""
    zones = {"UTC", *(job.timezone for job in load_catalog())}
    return {(name, instant.astimezone(ZoneInfo(name)).year) for name in zones}


def run_docs_blocks(state, tmp_path, env: dict[str, str]) -> None:
    """Each block the docs wrote for `make run`, in bash from a directory laid out as the
    checkout a reader runs it from: `.venv`, the Makefile, and `.dev` (this stack's state)."""
    reader = tmp_path / "reader"
    reader.mkdir()
    for name, target in ((".venv", ROOT / ".venv"), (".dev", state)):
        (reader / name).symlink_to(target)
    for name in ("Makefile", "pyproject.toml"):  # `make psql` (its .venv is up to date)
        (reader / name).symlink_to(ROOT / name)
    blocks = marked("runnable on make run:")
    assert len(blocks) >= 3, blocks
    for block in blocks:
        done = subprocess.run(
            ["bash", "-c", "set -euo pipefail\n" + block.body],
            cwd=reader,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, f"{block.where}:\n{done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stderr, f"{block.where}:\n{done.stderr}"


def demo_key(log: str, how: str) -> str:
    """The demo tenant's key as `make run` printed it, `how` it came (created, kept)."""
    (key,) = re.findall(
        rf"API key of the demo tenant {DEMO_TENANT} \({re.escape(how)}\): (\S+)", log
    )
    return key


def run_api_walkthrough(tmp_path, env: dict[str, str]) -> str:
    """docs/api.md's ```bash blocks, in order, in one bash (a reader's terminal: a variable
    one block sets, the next reads), with this venv first on PATH (the page's `source
    .venv/bin/activate`); the output."""
    blocks = re.findall(
        r"^```bash\n(.*?)^```$", (ROOT / "docs" / "api.md").read_text(), re.M | re.S
    )
    assert len(blocks) >= 8, blocks
    for tool in ("curl", "jq"):
        assert shutil.which(tool), f"docs/api.md's walkthrough needs {tool}: install it"
    path = f"{Path(sys.executable).parent}:{env.get('PATH', os.defpath)}"
    done = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + "\n".join(blocks)],
        cwd=tmp_path,
        env=env | {"PATH": path},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"docs/api.md:\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout


def interrupt(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGINT)
    return proc.wait(90)


async def test_local_stack_runs_a_triggered_job_stops_cleanly_and_restarts(tmp_path, service_tmp):
    ports = tuple(free_port() for _ in range(7))
    # The stack's state holds its PostgreSQL data: outside pytest's directories (conftest).
    state, log = service_tmp / f"dev-{ports[0]}", tmp_path / "run.log"
    db_url = f"postgresql://postgres@127.0.0.1:{ports[0]}/scheduled_jobs"
    address = f"127.0.0.1:{ports[1]}"
    api_url = f"http://127.0.0.1:{ports[6]}"

    first_sync = datetime.now(UTC)  # no later than the first start's sync
    stack = start_stack(state, log, ports)
    try:
        wait_for_text(log, "workers ready", timeout=120)
        assert "2 replicas" in log.read_text() and "a dispatcher on" in log.read_text()
        assert f"webhook receiver on http://127.0.0.1:{ports[5]}/hooks" in log.read_text()
        with urllib.request.urlopen(f"http://127.0.0.1:{ports[2]}/", timeout=10) as page:
            assert page.status == 200
        # The HTTP API serves, and the demo tenant's key it printed reads that tenant's
        # schedules (one weekly report each); the key is the one kept in the state.
        assert f"HTTP API on {api_url}" in log.read_text()
        key = demo_key(log.read_text(), "created now")
        assert (state / "api-key").read_text().strip() == key
        assert (state / "api-key").stat().st_mode & 0o077 == 0, "readable by its owner only"
        listed = httpx.get(f"{api_url}/v1/schedules", headers={"Authorization": f"Bearer {key}"})
        assert listed.status_code == 200, listed.text
        assert [s["tenant"] for s in listed.json()["schedules"]] == [DEMO_TENANT]
        listed = subprocess.run(
            [temporal_binary(), "schedule", "list", "--address", address],
            capture_output=True,
            text=True,
            check=True,
        )
        assert "invoice-reminders" in listed.stdout

        # A second stack on the same ports says which port is taken and leaves the first alone.
        second = subprocess.run(
            [
                sys.executable,
                "-m",
                "devstack",
                f"--state={state}",
                f"--pg-port={ports[0]}",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 2
        assert f"port {ports[0]}" in second.stderr and "in use" in second.stderr

        with psycopg.connect(db_url) as conn:
            (unpaid,) = conn.execute(
                "SELECT count(*) FROM invoices WHERE status = 'Unpaid' AND due_date < current_date"
            ).fetchone()
        assert unpaid > 0  # the demo data has invoices past due
        for job in ("invoice-reminders",):
            subprocess.run(
                [
                    *(temporal_binary(), "schedule", "trigger"),
                    *("--schedule-id", job, "--address", address),
                ],
                check=True,
                capture_output=True,
            )

        def outbox() -> str:
            return subprocess.run(
                [sys.executable, "-m", "worker", "outbox", "--limit", "3"],
                cwd=ROOT,
                env=os.environ | {"DATABASE_URL": db_url},
                capture_output=True,
                text=True,
                check=True,
            ).stdout

        async def reminders_delivered():
            # The outbox-relay job mails each reminder to the local SMTP sink. The oracle:
            # unpaid invoices due before the triggered run's slot (its UTC date), counted
            # here; the date the trigger fell on, not the one an earlier query saw (they
            # differ across midnight UTC, or in a database session in another zone).
            with psycopg.connect(db_url) as conn:
                slots = conn.execute(
                    "SELECT scheduled_at FROM job_executions "
                    "WHERE job_name = 'invoice-reminders' AND origin = 'manual'"
                ).fetchall()
                assert len(slots) == 1, slots
                (overdue,) = conn.execute(
                    "SELECT count(*) FROM invoices WHERE status = 'Unpaid' "
                    "AND due_date < (%s::timestamptz AT TIME ZONE 'UTC')::date",
                    slots[0],
                ).fetchone()
                delivered = conn.execute(
                    "SELECT count(*) FILTER (WHERE dispatched_at IS NOT NULL), count(*) "
                    "FROM outbox_messages WHERE type = 'InvoiceReminder'"
                ).fetchone()
            assert delivered == (overdue, overdue)
            mails = [m.read_bytes() for m in (state / "mail").glob("*.eml")]
            assert sum(b"\r\nX-Outbox-Type: InvoiceReminder\r\n" in m for m in mails) == overdue

        await assert_eventually(reminders_delivered, timeout=120)

        async def sessions_running():  # the sync at start-up started the engine's sessions
            with psycopg.connect(db_url) as conn:
                sessions = conn.execute(
                    "SELECT job_name, status FROM job_executions"
                    " WHERE job_name ~ '^(runtime-dispatch-\\d+|outbox-relay)$'"
                    " AND origin = 'manual' ORDER BY job_name"
                ).fetchall()
            engine = ["outbox-relay", *(f"runtime-dispatch-{i}" for i in range(4))]
            assert sessions == [(job, "running") for job in engine]

        await assert_eventually(sessions_running, timeout=60)
        shown = outbox()
        assert "InvoiceReminder" in shown and "@" not in shown  # no customer emails printed

        # The docs' walks over the demo data (docs/jobs.md, docs/outbox.md), as written; the
        # stack's ports are not the defaults, so the two variables say where they are.
        reader_env = {
            k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "DATA"))
        }
        run_docs_blocks(
            state, tmp_path, reader_env | {"TEMPORAL_ADDRESS": address, "DATABASE_URL": db_url}
        )
        # docs/api.md's curl walkthrough, as written, in one shell: its triggered run is
        # among those the audit below judges.
        walkthrough = run_api_walkthrough(
            tmp_path, reader_env | {"SCHEDULES_API_URL": api_url, "DATABASE_URL": db_url}
        )
        assert "412" in walkthrough.splitlines(), walkthrough  # the stale If-Match

        # Meanwhile the whole catalog ran live beside the trigger (card-settlement every
        # minute, outbox-relay every 30 s, the others at their times if one came): the
        # audit an operator runs judges it all clean, once the runs in flight have settled.
        async def audit_clean():
            env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "DATA"))}
            done = subprocess.run(
                [sys.executable, "-m", "schedules", "audit", "--settle", "0s"],
                cwd=ROOT,
                env=env | {"TEMPORAL_ADDRESS": address, "DATABASE_URL": db_url},
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, done.stdout + done.stderr
            assert done.stdout.startswith("audit: 0 finding(s)"), done.stdout

        await assert_eventually(audit_clean, timeout=120, interval=1)
    finally:
        assert interrupt(stack) == 0
    assert "[make run] stopped" in log.read_text()

    # The second start reuses the state: the schedule is updated, demo data is not reloaded.
    log2 = tmp_path / "run2.log"
    again = start_stack(state, log2, ports)
    try:
        wait_for_text(log2, "workers ready", timeout=120)
        second_sync = datetime.now(UTC)  # no earlier than the second start's sync
        wait_for_text(log2, f"API key of the demo tenant {DEMO_TENANT}", timeout=120)
        assert demo_key(log2.read_text(), f"kept in {state / 'api-key'}") == key
        text = log2.read_text()
        assert "migrations applied: 0 new" in text
        if local_years(first_sync) == local_years(second_sync):
            assert "schedules synced: no changes" in text
        else:  # a New Year between the two syncs: the new year's specs are written
            assert "schedules synced: " in text
        with psycopg.connect(db_url) as conn:
            # The demo's own invoices (monthly-billing, firing live at 03:00 New York on a
            # 1st, may have added its own since).
            (demo,) = conn.execute(
                "SELECT count(*) FROM invoices WHERE subscription_id IS NULL"
            ).fetchone()
            assert demo == 1200
            reminder_runs = conn.execute(
                "SELECT scheduled_at FROM job_executions WHERE job_name = 'invoice-reminders'"
            ).fetchall()
        # The stack runs its schedules live: the nightly 02:30 London one may have fired
        # meanwhile. Besides those, the one triggered run, and no other.
        london = ZoneInfo("Europe/London")
        triggered = [
            t for (t,) in reminder_runs if f"{t.astimezone(london):%H:%M:%S}" != "02:30:00"
        ]
        assert len(triggered) == 1
    finally:
        assert interrupt(again) == 0
