"""A rolling upgrade with runs in flight (issue 37, item 4): the previous release's fleet,
upgraded one worker at a time to this tree's, finishes every run once.

The previous release is the wheel of a fixed commit of main (`PREVIOUS`), the current one
the wheel of the working tree; each is installed non-editable in a venv of its own and run
from a directory outside the checkout, as a deployment runs them. The old fleet (workers A
and B) migrates the database, syncs a catalog and takes three runs in flight, each held
where the test wants it, not where timing would leave it:

- `invoice-reminders`, a chunked job, between two chunks (the chunk gate,
  tests/integration/chunk_gate.py);
- `monthly-billing`, a job of steps, in its charging step (the payment provider holds
  every charge, devstack/payments.py);
- a runtime batch of test-noop slots, between its activity calls (the chunk gate).

Then the documented rolling upgrade (docs/deploy.md, "Upgrading"): the new release's
`worker migrate` while A and B still run (and go on: a chunk and a batch call more, on
the new schema), then A stopped and the new A' started, then B
and B'. The held attempts are drained and cut off with their old worker and resumed on the
new ones (from the progress the old release saved). Every run ends once, each invoice is
reminded once, each subscription charged once, each step and slot run once, and the new
release's `schedules audit` is clean.
"""

from __future__ import annotations

import shutil
import signal
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from devstack import free_port
from devstack.payments import PaymentProviderServer
from tests.helpers import assert_eventually, wait_for_text
from tests.helpers.wheel import (
    build_wheel,
    export_commit,
    export_tree,
    installed_env,
    make_venv,
    run,
    venv_with,
)
from tests.helpers.worker import WorkerProcess, settings_env
from tests.integration.chunk_gate import ChunkGate
from tests.integration.jobs import insert_invoices
from tests.integration.namespaces import fleet_of_its_own
from tests.integration.runtime import insert_schedule

pytestmark = pytest.mark.timeout(300)

# The previous release: main at the first commit whose wheel installs correctly (its
# package data was fixed just before). Move it forward when a release ships.
PREVIOUS = "eb6d6e9"

INVOICES = 10  # five chunks of two
SUBSCRIPTIONS = 4  # four charge batches of one
SLOTS = 1000  # one batch workflow (BATCH_SLOTS), two calls of its activity: 500 each

# Paused: only the test's triggers start runs. Short retries: an attempt cut off with its
# worker is retried at once on another.
RETRY = 'retry = { maximum_attempts = 20, initial_interval = "1s", maximum_interval = "2s" }'
TRIGGERED_ONLY = f"""timezone = "UTC"
paused = true
note = "test: triggered runs only"
timeout = "10m"
heartbeat = "20s"
{RETRY}"""
CATALOG = f"""
[invoice-reminders]
description = "Remind customers of unpaid invoices past due (the upgrade test's)."
owner = "billing"
kind = "invoice-reminders"
cron = "30 2 * * *"
{TRIGGERED_ONLY}

[invoice-reminders.params]
chunk_size = 2
remind_every_days = 7

[monthly-billing]
description = "Bill last month's subscriptions in steps (the upgrade test's)."
owner = "billing"
kind = "monthly-billing"
cron = "0 3 1 * *"
{TRIGGERED_ONLY}

[monthly-billing.params]
chunk_size = 1000
charge_batch = 1
concurrency = 1

[runtime-dispatch-0]
description = "Start the due slots of shard 0 of the runtime schedules (the upgrade test's)."
owner = "platform"
kind = "runtime-dispatch"
cron = "* * * * *"
timezone = "UTC"
paused = true
note = "test: triggered ticks only"
timeout = "10m"
heartbeat = "20s"
{RETRY}

[runtime-dispatch-0.params]
shard = 0
"""
JOBS = ("invoice-reminders", "monthly-billing", "runtime-dispatch-0")
# What a worker told to stop logs when a charge of its step is in flight, and when it is done.
CUT_OFF = "step cancelled: finishing its batch under way first"
STOPPED = "worker stopped"


@pytest.fixture(scope="module")
def releases(tmp_path_factory) -> Iterator[dict[str, Path]]:
    """The interpreters of two venvs: `old` holds the previous release's wheel, `new` the
    working tree's (and the same dependencies). Each wheel is built once, from a clean
    export of its tree."""
    exports = {"old": lambda out: export_commit(PREVIOUS, out), "new": export_tree}

    def build(release: str) -> tuple[str, Path]:
        source = exports[release](tmp_path_factory.mktemp(f"{release}-src"))
        return release, build_wheel(source, tmp_path_factory.mktemp(f"{release}-dist"))

    with ThreadPoolExecutor() as pool:  # side by side: each is a pip process of its own
        wheels = dict(pool.map(build, exports))
    old = make_venv(tmp_path_factory.mktemp("old-venv"), [wheels["old"]])
    new = venv_with(old, tmp_path_factory.mktemp("venvs") / "new", wheels["new"])
    yield {"old": old, "new": new}
    for python in (old, new):
        shutil.rmtree(python.parent.parent)  # 125 MB each (hard links: the same blocks)


@pytest.fixture
def provider() -> Iterator[PaymentProviderServer]:
    server = PaymentProviderServer(free_port())
    server.start()
    yield server
    server.stop()


def seed(db: psycopg.Connection, minute: datetime) -> None:
    """Overdue invoices, subscriptions of last month, and runtime slots due at `minute`."""
    insert_invoices(db, INVOICES, due=date.today() - timedelta(days=10))
    db.execute(
        "INSERT INTO subscriptions (customer_email, plan, amount_cents, started_on,"
        " payment_method)"
        " SELECT 'sub' || k || '@example.com', 'team', 1000 + k, '2000-01-01', 'pm_card_' || k"
        " FROM generate_series(1, %s) AS k",
        (SUBSCRIPTIONS,),
    )
    for i in range(SLOTS):
        insert_schedule(
            db,
            **{"tenant": f"t{i}", "name": "ping", "kind": "test-noop"},
            **{"cron": "* * * * *", "timezone": "UTC"},
            **{"next_fire_at": minute, "timing_since": minute, "end_at": minute},  # once
        )
    db.execute("UPDATE runtime_schedules SET shard = 0")  # one dispatcher, one batch


def statuses(db: psycopg.Connection) -> dict[str, list[str]]:
    """Each job's executions' statuses; the runtime slots' under `rt`."""
    rows = db.execute(
        "SELECT CASE WHEN job_name LIKE 'rt-%%' THEN 'rt' ELSE job_name END, status"
        " FROM job_executions ORDER BY 1, 2"
    ).fetchall()
    found: dict[str, list[str]] = {}
    for job, status in rows:
        found.setdefault(job, []).append(status)
    return found


def reminded(db: psycopg.Connection) -> int:
    return db.execute(
        "SELECT count(*) FROM invoices WHERE last_reminder_at IS NOT NULL"
    ).fetchone()[0]


def slots_completed(db: psycopg.Connection) -> int:
    return statuses(db).get("rt", []).count("completed")


class Fleet:
    """The fleet's processes, each run from `cwd` (outside the checkout) with `env`, by the
    release it is given (`old` or `new`): its CLI commands and its worker replicas."""

    def __init__(
        self, releases: dict[str, Path], env: dict[str, str], cwd: Path, namespace: Client
    ) -> None:
        self.releases, self.env, self.cwd, self.namespace = releases, env, cwd, namespace
        self.database_url = env["DATABASE_URL"]
        self.replicas: list[WorkerProcess] = []  # every replica started, stopped at the end

    def cli(self, release: str, *argv: str) -> str:
        """`python -m ARGV` of `release`; its output (it must exit 0, with no traceback)."""
        done = run([self.releases[release], "-m", *argv], cwd=self.cwd, env=self.env, timeout=300)
        assert "Traceback" not in done.stderr, done.stderr
        return done.stdout

    def start(self, release: str, *names: str) -> list[WorkerProcess]:
        """Worker replicas of `release`, started side by side, once ready."""
        started = [
            WorkerProcess(self.env, self.cwd / f"{name}.log", self.releases[release], self.cwd)
            for name in names
        ]
        self.replicas += started
        for replica in started:
            replica.wait_ready()
        return started

    async def stop(self, replica: WorkerProcess, provider: PaymentProviderServer) -> None:
        """Stop `replica` as a deployment does: SIGTERM, it drains for its grace period,
        then cuts off what is still held. A charge it has in flight is answered once its
        step is told to stop, as a live provider would: the step finishes that batch,
        stops, and is retried on another replica, whose charge waits at the provider."""
        replica.signal(signal.SIGTERM)
        if wait_for_text(replica.log, (CUT_OFF, STOPPED), timeout=60) == CUT_OFF:
            await answer_one(provider)
        assert replica.process.wait(60) == 0, replica.log.read_text()[-3000:]
        replica.stop()

    def stop_all(self) -> None:
        for replica in self.replicas:
            replica.stop()


@pytest.fixture
async def fleet(releases, postgres, client, provider, tmp_path) -> AsyncIterator[Fleet]:
    """A fleet of its own: a fresh namespace, task queue and empty database."""
    namespace, settings = await fleet_of_its_own(
        client,
        postgres,
        "upgrade",
        # A held attempt is cut off this long after its replica is told to stop.
        worker_graceful_shutdown_seconds=2,
    )
    env = settings_env(
        settings,
        SMTP_PORT=str(free_port()),  # the outbox's mail stays pending: no relay runs
        PAYMENTS_URL=provider.url,
        PAYMENTS_TIMEOUT_SECONDS="120",  # a held charge waits for the test, not a timeout
        **ChunkGate.env,
    )
    outside = tmp_path / "elsewhere"  # nothing of the checkout is importable from here
    outside.mkdir()
    (outside / "jobs.toml").write_text(CATALOG)
    built = Fleet(releases, installed_env(env), outside, namespace)
    yield built
    built.stop_all()
    for replica in built.replicas:
        assert replica.process.returncode == 0, replica.log.read_text()[-3000:]


async def test_a_rolling_upgrade_finishes_every_run_in_flight_once(fleet, provider):
    began = datetime.now(UTC).replace(microsecond=0)
    on_catalog = ("schedules", "--catalog", "jobs.toml")
    fleet.cli("old", "worker", "migrate")
    fleet.cli("old", *on_catalog, "sync")
    db = psycopg.connect(fleet.database_url, autocommit=True)
    gate = ChunkGate(fleet.database_url)  # closed: every chunk and batch call waits at it
    try:
        seed(db, began.replace(second=0))
        old_a, old_b = fleet.start("old", "a", "b")
        provider.hold()  # every charge waits at the provider
        with ThreadPoolExecutor() as pool:  # each a process of its own: side by side
            list(pool.map(lambda job: fleet.cli("old", *on_catalog, "trigger", job), JOBS))

        # The old fleet takes each run in flight: the reminders before their first chunk
        # and the dispatcher between its decision and its starts, then a chunk through the
        # gate and the batch's first call at it; the billing run in its charging step.
        await gate.reached(2)
        gate.step()
        await gate.reached(2)
        await assert_eventually(held_at_provider(provider), timeout=60)
        assert (reminded(db), slots_completed(db)) == (2, 0)
        held = statuses(db)
        assert (held["invoice-reminders"], held["monthly-billing"]) == (["running"], ["running"])

        # The rolling upgrade: migrate first, beside the old replicas, which go on working
        # on the new schema (a chunk and a batch call more); then one replica at a time.
        fleet.cli("new", "worker", "migrate")
        gate.step()
        await gate.reached(2)
        assert (reminded(db), slots_completed(db)) == (4, 500)
        await fleet.stop(old_a, provider)
        fleet.start("new", "a-new")
        await fleet.stop(old_b, provider)
        fleet.start("new", "b-new")

        # The held attempts, cut off with the old replicas, wait again on the new ones,
        # from where the old ones left them.
        await gate.reached(2)
        assert (reminded(db), slots_completed(db)) == (4, 500)
        await assert_eventually(held_at_provider(provider), timeout=60)
        gate.open()
        provider.release()
        await assert_eventually(all_completed(db, fleet.namespace), timeout=120, interval=0.2)
        assert_each_effect_once(db, provider)

        # The new release judges the whole history, the old replicas' part with it.
        audit = fleet.cli(
            "new", *on_catalog, "audit", "--from", began.isoformat(), "--settle", "0s"
        )
        assert audit.strip().splitlines()[-1].startswith("audit: 0 finding(s);"), audit
    finally:
        gate.close()
        provider.release()
        fleet.stop_all()
        db.close()


def all_completed(db: psycopg.Connection, namespace: Client):
    """A check: every run completed, once (one execution each), and every workflow of
    theirs (the runs, the billing steps, the batch) closed as completed."""

    async def check():
        assert statuses(db) == {job: ["completed"] for job in JOBS} | {"rt": ["completed"] * SLOTS}
        runs = [w.status async for w in namespace.list_workflows()]
        assert len(runs) >= 5 and set(runs) == {WorkflowExecutionStatus.COMPLETED}, runs

    return check


def held_at_provider(provider: PaymentProviderServer):
    """A check: a charge waits at the provider."""

    async def check():
        assert provider.arrived.is_set()

    return check


async def answer_one(provider: PaymentProviderServer) -> None:
    """Let the charge that waits at the provider through, and hold the next one."""
    answered = len(provider.keys())
    provider.release()  # wakes the request waiting now; the next one waits again
    provider.hold()

    async def through():
        assert len(provider.keys()) > answered

    await assert_eventually(through, timeout=30, interval=0.05)


def assert_each_effect_once(db: psycopg.Connection, provider: PaymentProviderServer) -> None:
    """Each invoice reminded once, each subscription invoiced, charged and receipted once,
    each step of the billing run and each slot completed once, under one execution each."""
    reminders = db.execute(
        "SELECT count(*), count(DISTINCT payload->>'invoice_number') FROM outbox_messages"
        " WHERE type = 'InvoiceReminder'"
    ).fetchone()
    assert (reminded(db), *reminders) == (INVOICES, INVOICES, INVOICES)
    billed = db.execute(
        "SELECT (SELECT count(*) FROM invoices WHERE billing_month IS NOT NULL),"
        " (SELECT count(*) FROM charges WHERE status = 'charged'),"
        " (SELECT count(*) FROM outbox_messages WHERE type = 'PaymentReceipt')"
    ).fetchone()
    assert billed == (SUBSCRIPTIONS,) * 3
    assert sorted(provider.charged().values()) == [1] * SUBSCRIPTIONS
    steps = db.execute(
        "SELECT s.step, s.status FROM job_steps s JOIN job_executions e ON e.id = s.execution_id"
        " WHERE e.job_name = 'monthly-billing' ORDER BY s.step"
    ).fetchall()
    assert [status for _, status in steps] == ["completed"] * 4, steps
    duplicates = db.execute("SELECT sum(duplicate_runs) FROM job_executions").fetchone()[0]
    assert duplicates == 0
    # One take-over and one completion journaled per slot, whichever attempt made them.
    journals = db.execute(
        "SELECT count(*) FROM ("
        " SELECT array_agg(what ORDER BY seq) AS whats FROM commit_journal c"
        " JOIN job_executions e ON e.id = c.execution_id WHERE e.job_name LIKE 'rt-%%'"
        " GROUP BY execution_id) j WHERE whats = ARRAY['take_over', 'complete']"
    ).fetchone()[0]
    assert journals == SLOTS
