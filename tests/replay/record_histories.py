"""Record workflow histories for the replay tests (`tests/replay/test_replay.py`).

Runs each scenario below on a throwaway Temporal dev server and PostgreSQL with the code as
it is checked out, and saves every closed workflow's history as JSON under
`tests/replay/histories/<label>/`. Record a new label before a release that changes workflow
code, and keep the old ones: the replay test replays every recorded history against the new
code, so a change that would break workflows still running at deploy time fails CI.

    .venv/bin/python -m tests.replay.record_histories LABEL
    .venv/bin/python -m tests.replay.record_histories LABEL --scenarios runtime

The catalog scenarios cover every path through `ScheduledJobWorkflow`: an on-time run,
catch-up of missed slots, a slot that already completed (a no-op, marked
`ScheduledJobsOutcome`), the repeated fall-back hour, a starting deadline, a direct start
without a schedule, a permanent failure, a backfill under overlap Skip that drops slots (its
run notes them), and each reference job. The runtime scenarios
(`tests/replay/runtime_scenarios.py`) cover the runs of runtime schedules, `RuntimeRunWorkflow`
and `RuntimeBatchWorkflow`; `--scenarios` records one group only (a release that changes one
workflow records that one's).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool
from temporalio.client import (
    Client,
    ScheduleBackfill,
    ScheduleOverlapPolicy,
    ScheduleSpec,
    WorkflowExecutionStatus,
)

from activities.runtime.models import RuntimeRun, slot_workflow_id
from core.payloads import data_converter
from devstack import EmbeddedPostgres, TemporalDevServer, free_port
from devstack.payments import PaymentProviderServer
from schedules.catalog.compile import (
    MANAGED_MEMO_KEY,
    MANAGED_MEMO_VALUE,
    compile_schedule,
    job_run,
)
from schedules.catalog.model import default_catalog, parse_catalog
from schedules.sync.attributes import outcome_attribute
from tests.replay.runtime_scenarios import runtime_scenarios
from worker.migrate import apply_migrations
from worker.release import release_waiters
from worker.run import build_worker
from worker.settings import Settings
from workflows import workflow_for
from workflows.runtime_run import RuntimeRunWorkflow

HERE = Path(__file__).resolve().parent
HOUR = timedelta(hours=1)


def _job(job_id: str, **table):
    return parse_catalog({job_id: table})[0]


class Recorder:
    def __init__(self, client: Client, db_url: str, task_queue: str, out: Path) -> None:
        self.client, self.db_url, self.task_queue, self.out = client, db_url, task_queue, out

    async def create(self, job, timing_since: datetime | None = None, *, raw: bool = False) -> None:
        # As sync stamps it: the job's timing holds from now, so older slots are backfills.
        since = timing_since or datetime.now(UTC).replace(microsecond=0)
        schedule = compile_schedule(job, self.task_queue, since)
        if raw:  # as Temporal alone would fire the cron: both 01:30s of a fall-back night
            schedule.spec = ScheduleSpec(cron_expressions=[job.cron], time_zone_name=job.timezone)
        schedule.state.paused = True  # only backfills start runs: nothing fires by chance
        await self.client.create_schedule(
            job.id, schedule, memo={MANAGED_MEMO_KEY: MANAGED_MEMO_VALUE}
        )

    async def backfill(self, job_id: str, *slots: datetime, name: str) -> None:
        """Backfill `slots` one by one, waiting for each run to close; save each history."""
        handle = self.client.get_schedule_handle(job_id)
        for n, slot in enumerate(slots):
            await handle.backfill(
                ScheduleBackfill(
                    start_at=slot - timedelta(seconds=1),
                    end_at=slot + timedelta(seconds=1),
                    overlap=ScheduleOverlapPolicy.ALLOW_ALL,
                )
            )
            workflow_id = f"{job_id}-{slot:%Y-%m-%dT%H:%M:%SZ}"
            await self.save(workflow_id, f"{name}-{n}" if len(slots) > 1 else name, newest=True)

    async def backfill_nowait(self, job_id: str, slot: datetime) -> None:
        """Backfill one slot and go on (its run waits for something the caller does next)."""
        await self.client.get_schedule_handle(job_id).backfill(
            ScheduleBackfill(
                start_at=slot - timedelta(seconds=1),
                end_at=slot + timedelta(seconds=1),
                overlap=ScheduleOverlapPolicy.ALLOW_ALL,
            )
        )

    async def save(self, workflow_id: str, name: str, *, newest: bool = False) -> None:
        """Wait for the workflow (its newest run) to close, then write its history."""
        deadline = asyncio.get_running_loop().time() + 120
        while True:
            runs = [
                w
                async for w in self.client.list_workflows(f"WorkflowId = '{workflow_id}'")
                if w.status != WorkflowExecutionStatus.RUNNING
            ]
            if runs and (not newest or len(runs) >= self._seen.get(workflow_id, 0) + 1):
                break
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"{workflow_id} did not close")
            await asyncio.sleep(0.2)
        self._seen[workflow_id] = len(runs)
        run = max(runs, key=lambda w: w.start_time)
        history = await self.client.get_workflow_handle(
            workflow_id, run_id=run.run_id
        ).fetch_history()
        (self.out / f"{name}.json").write_text(
            json.dumps(json.loads(history.to_json()), indent=1) + "\n"
        )
        # The workflow id matters to replay: a child workflow's id is derived from it.
        ids_file = self.out / "workflow_ids.json"
        ids = json.loads(ids_file.read_text()) if ids_file.exists() else {}
        ids_file.write_text(json.dumps(ids | {name: workflow_id}, indent=1, sort_keys=True) + "\n")
        print(f"recorded {name}: {workflow_id} ({run.status.name})")

    _seen: dict[str, int] = {}
    provider: PaymentProviderServer

    def sql(self, statement: str, *args) -> None:
        with psycopg.connect(self.db_url, autocommit=True) as conn:
            conn.execute(statement, args)


async def scenarios(rec: Recorder) -> None:
    catalog = default_catalog()
    now = datetime.now(UTC).replace(microsecond=0)
    last_hour = now.replace(minute=0, second=0)

    # Invoice reminders: an ordinary run, then the same slot again (already completed).
    rec.sql(
        "INSERT INTO invoices (invoice_number, customer_email, status, due_date) "
        "SELECT 'INV-' || n, 'c' || n || '@example.com', 'Unpaid', %s::date "
        "FROM generate_series(1, 30) AS n",
        (now - timedelta(days=10)).date(),
    )
    reminders = catalog["invoice-reminders"].model_copy(update={"params": {"chunk_size": 10}})
    await rec.create(reminders)
    night = (now - timedelta(days=1)).replace(hour=2, minute=30, second=0)
    await rec.backfill(reminders.id, night, name="invoice-reminders-completed")
    await rec.backfill(reminders.id, night, name="invoice-reminders-already-completed")
    # A chunked run whose work ends within its first chunk: plan, claim, chunk and
    # completion in the one local activity that begins it (the run above has three chunks:
    # its first in that activity, the others in its work activity).
    one_chunk = reminders.model_copy(
        update={"id": "replay-reminders-one-chunk", "params": {"chunk_size": 1000}}
    )
    await rec.create(one_chunk)
    await rec.backfill(one_chunk.id, night, name="invoice-reminders-one-chunk")

    # A backfill of four past hours under overlap Skip (the Web UI dialog's default): the
    # server runs the first and skips the three others; the run notes them in its details.
    dropped = _job(
        "replay-backfill-skip", kind="invoice-reminders", cron="0 * * * *", timezone="UTC"
    )
    await rec.create(dropped)
    first = last_hour - 4 * HOUR
    await rec.client.get_schedule_handle(dropped.id).backfill(
        ScheduleBackfill(
            start_at=first, end_at=last_hour - HOUR, overlap=ScheduleOverlapPolicy.SKIP
        )
    )
    await rec.save(f"{dropped.id}-{first:%Y-%m-%dT%H:%M:%SZ}", "backfill-skipped")

    # Catch-up: an hourly job whose record stops five hours ago runs the newest 3, records
    # the older missed ones as a gap.
    hourly = _job(
        "replay-catchup-all",
        kind="hourly-sync",
        cron="0 * * * *",
        timezone="UTC",
        catchup="all",
        max_missed=3,
        catchup_window="3h",
    )
    await rec.create(hourly, timing_since=now - 8 * HOUR)
    rec.sql(
        "INSERT INTO job_executions (job_name, scheduled_at, status, origin, finished_at) "
        "VALUES (%s, %s, 'completed', 'scheduled', now())",
        hourly.id,
        last_hour - 6 * HOUR,
    )
    await rec.backfill(hourly.id, last_hour, name="catchup-all")

    latest = _job(
        "replay-catchup-latest",
        kind="invoice-reminders",
        interval="10m",
        timezone="UTC",
        catchup="latest",
    )
    await rec.create(latest, timing_since=now - 2 * HOUR)
    ten = now.replace(minute=now.minute // 10 * 10, second=0)
    rec.sql(
        "INSERT INTO job_executions (job_name, scheduled_at, status, origin, finished_at) "
        "VALUES (%s, %s, 'completed', 'scheduled', now())",
        latest.id,
        ten - timedelta(minutes=50),
    )
    await rec.backfill(latest.id, ten, name="catchup-latest")

    # The repeated fall-back hour: the second 01:30 is skipped when the first one ran.
    fall = _job(
        "replay-fall-back", kind="invoice-reminders", cron="30 1 * * *", timezone="America/New_York"
    )
    await rec.create(fall, raw=True)
    first, second = (datetime(2027, 11, 7, h, 30, tzinfo=UTC) for h in (5, 6))
    await rec.backfill(fall.id, first, second, name="fall-back")

    # Starting deadline: a backfilled night long past its deadline is recorded skipped.
    strict = _job(
        "replay-deadline",
        kind="invoice-reminders",
        cron="30 2 * * *",
        timezone="UTC",
        starting_deadline="1m",
    )
    await rec.create(strict)
    await rec.backfill(strict.id, night - timedelta(days=1), name="starting-deadline")

    # Started without a schedule, once fine and once with params that fail for good.
    for name, params in (("direct", {}), ("direct-failed", {"chunk_size": 0})):
        job = catalog["invoice-reminders"].model_copy(update={"id": f"replay-{name}"})
        run = job_run(job).model_copy(update={"params": params})
        workflow_id = f"replay-{name}-{uuid.uuid4().hex[:6]}"
        await rec.client.start_workflow(
            workflow_for(run), run, id=workflow_id, task_queue=rec.task_queue
        )
        await rec.save(workflow_id, name)

    # Monthly billing, a workflow job: a month billed, then a month whose charging fails
    # for good and is compensated (its steps' histories are the child workflows').
    rec.sql(
        "INSERT INTO subscriptions (customer_email, plan, amount_cents, started_on, "
        "payment_method) SELECT 'sub' || n || '@example.com', 'team', 1900, '2026-01-01', "
        "CASE WHEN n %% 5 = 0 THEN 'pm_decline_insufficient_funds' ELSE 'pm_card' END "
        "FROM generate_series(1, 12) AS n"
    )
    billing = catalog["monthly-billing"].model_copy(
        update={
            "params": {"charge_batch": 4, "concurrency": 2},
            "retry": catalog["monthly-billing"].retry.model_copy(
                update={"maximum_attempts": 2, "initial_interval": timedelta(seconds=0.2)}
            ),
        }
    )
    await rec.create(billing)
    september, october = (datetime(2026, m, 1, 7, tzinfo=UTC) for m in (9, 10))
    await rec.backfill(billing.id, september, name="monthly-billing-completed")
    await rec.save(f"{billing.id}-{september:%Y-%m-%dT%H:%M:%SZ}/steps", "monthly-billing-steps")
    rec.provider.fail_with(503, after=4)
    await rec.backfill(billing.id, october, name="monthly-billing-compensated")
    await rec.save(
        f"{billing.id}-{october:%Y-%m-%dT%H:%M:%SZ}/steps", "monthly-billing-steps-compensated"
    )
    rec.provider.recover()

    # Business calendars (v6): a fire time that runs the slots its calendar moved there
    # (Saturday, Sunday and Monday 30 November 2026 on NYSE days, `following`), and one that
    # runs a later slot before its time (Thanksgiving, `preceding`, on Wednesday the 25th).
    for rule, fire in (
        ("following", datetime(2026, 11, 30, 7, 30, tzinfo=UTC)),
        ("preceding", datetime(2026, 11, 25, 7, 30, tzinfo=UTC)),
    ):
        moved = _job(
            f"replay-calendar-{rule}",
            kind="invoice-reminders",
            cron="30 2 * * *",
            timezone="America/New_York",
            calendar="NYSE",
            on_holiday=rule,
        )
        await rec.create(moved)
        await rec.backfill(moved.id, fire, name=f"calendar-{rule}")

    # Every other reference job, one ordinary run each.
    # hourly-sync before nightly-reconcile, which depends on it (its schedule must exist).
    for job_id, slot in (
        ("card-settlement", now.replace(second=0) - timedelta(minutes=1)),
        ("hourly-sync", last_hour - HOUR),
        ("nightly-reconcile", night.replace(hour=7, minute=0)),
        ("weekly-cleanup", last_hour),
        ("outbox-relay", now.replace(second=0) - timedelta(minutes=1)),
    ):
        job = catalog[job_id]
        if job_id == "card-settlement":  # its 30 s deadline would skip a backfilled minute
            job = job.model_copy(update={"starting_deadline": None})
        if job_id == "outbox-relay":
            job = job.model_copy(update={"params": job.params | {"max_seconds": 1, "wake": False}})
        if job_id == "weekly-cleanup":  # any hour: a backfill slot need not be on the grid
            job = job.model_copy(update={"cron": "0 * * * *"})
        await rec.create(job)
        await rec.backfill(job.id, slot, name=job_id)

    # A kind whose slot work fits in one transaction, without upstreams, runs as
    # `LocalTransactionJobWorkflow` (`OneTransactionJobWorkflow` before v7) and begins in its
    # work activity, a local one since v7: a night, the same night
    # again (declined: another run holds it, so begin_run counts the duplicate), a catch-up
    # (the oldest missed night in the begin, the rest claimed after), and a run whose work
    # fails for good (its claim and failure recorded through begin_run).
    reconcile = catalog["nightly-reconcile"].model_copy(
        update={"id": "replay-reconcile-one", "depends_on": []}
    )
    await rec.create(reconcile)
    one_night = night.replace(hour=7, minute=0)
    await rec.backfill(reconcile.id, one_night, name="one-transaction")
    await rec.backfill(reconcile.id, one_night, name="one-transaction-again")
    behind = reconcile.model_copy(update={"id": "replay-reconcile-catchup"})
    nights = [night.replace(hour=7, minute=0) - timedelta(days=d) for d in (3, 2, 1, 0)]
    await rec.create(behind, timing_since=nights[0] - timedelta(hours=1))
    rec.sql(
        "INSERT INTO job_executions (job_name, scheduled_at, status, origin, finished_at) "
        "VALUES (%s, %s, 'completed', 'scheduled', now())",
        behind.id,
        nights[0],
    )
    await rec.backfill(behind.id, nights[-1], name="one-transaction-catchup")
    failing = reconcile.model_copy(update={"id": "replay-reconcile-failed"})
    run = job_run(failing).model_copy(update={"params": {"currency": "dollars"}})
    workflow_id = f"replay-reconcile-failed-{uuid.uuid4().hex[:6]}"
    await rec.client.start_workflow(
        workflow_for(run), run, id=workflow_id, task_queue=rec.task_queue
    )
    await rec.save(workflow_id, "one-transaction-failed")
    await dependency_scenarios(rec, last_hour)


async def dependency_scenarios(rec: Recorder, last_hour: datetime) -> None:
    """Slot dependencies (docs/dependencies.md): a run that waits and is released by the
    signal of its upstream's run, one skipped by its policy at a failed upstream, one run
    anyway at its deadline; a runtime schedule's run that waits for its tenant's schedule."""
    since = last_hour - 48 * HOUR
    upstream = {"kind": "hourly-sync", "cron": "0 * * * *", "timezone": "UTC"}
    up = _job("replay-up", **upstream)
    await rec.create(up, timing_since=since)
    rec.sql(
        "INSERT INTO job_executions (job_name, scheduled_at, status, origin, finished_at) "
        "VALUES (%s, %s, 'completed', 'scheduled', now()), (%s, %s, 'failed', 'scheduled', now())",
        up.id,
        last_hour,
        up.id,
        last_hour - 3 * HOUR,
    )
    depends = {"kind": "nightly-reconcile", "cron": "0 * * * *", "timezone": "UTC"}
    cases = (
        ("depends-released", 2, "wait", "1h"),
        ("depends-skipped", 3, "skip", "1h"),
        ("depends-run-anyway", 4, "run", "2s"),
    )
    for name, hours_ago, policy, within in cases:
        dependency = {"job": up.id, "slots": "same", "within": within, "on_failure": policy}
        tables = {up.id: upstream, f"replay-{name}": depends | {"depends_on": [dependency]}}
        down = parse_catalog(tables)[1]  # with its upstream: depends_on names it
        await rec.create(down)
        slot = last_hour - hours_ago * HOUR
        if name != "depends-released":
            await rec.backfill(down.id, slot, name=name)
            continue
        await rec.backfill_nowait(down.id, slot)  # it waits: the upstream's run releases it
        await rec.backfill(up.id, slot, name="depends-upstream")
        await rec.save(f"{down.id}-{slot:%Y-%m-%dT%H:%M:%SZ}", name)
    await runtime_scenario(rec, last_hour, since)


async def runtime_scenario(rec: Recorder, last_hour: datetime, since: datetime) -> None:
    """A runtime schedule's slot waits for its tenant's other schedule, whose run of the
    same slot releases it (both runs recorded, `RuntimeRunWorkflow`)."""
    ids = []
    for name, depends_on in (
        ("up", []),
        ("down", [{"schedule": "up", "slots": "same", "within": "PT1H", "on_failure": "wait"}]),
    ):
        with psycopg.connect(rec.db_url, autocommit=True) as conn:
            (sid,) = conn.execute(
                "INSERT INTO runtime_schedules (tenant, name, kind, cron, timezone, shard, "
                "timing_since, paused, depends_on) VALUES ('replay', %s, 'test-noop', "
                "'0 * * * *', 'UTC', 0, %s, true, %s) RETURNING id",
                (name, since, Jsonb(depends_on)),
            ).fetchone()
        ids.append(sid)
    slot = last_hour - 5 * HOUR
    up_id, down_id = ids
    for sid in (down_id, up_id):
        await rec.client.start_workflow(
            RuntimeRunWorkflow.run,
            RuntimeRun(schedule_id=sid, scheduled_at=slot, origin="backfill"),
            id=slot_workflow_id(sid, slot),
            task_queue=rec.task_queue,
        )
    await rec.save(slot_workflow_id(up_id, slot), "runtime-upstream")
    await rec.save(slot_workflow_id(down_id, slot), "runtime-depends-released")


SCENARIOS = {"catalog": scenarios, "runtime": runtime_scenarios}


async def record(label: str, groups: tuple[str, ...] = tuple(SCENARIOS)) -> None:
    out = HERE / "histories" / label
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        pg = EmbeddedPostgres(Path(tmp) / "pg", free_port())
        pg.start()
        temporal = TemporalDevServer(free_port(), None, None, Path(tmp) / "temporal.log")
        temporal.start()
        try:
            await temporal.wait_ready()
            db_url = pg.create_database("replay")
            apply_migrations(db_url)
            client = await Client.connect(temporal.address, data_converter=data_converter)
            await outcome_attribute(client, register=True)  # as sync does: no-op runs mark it
            task_queue = f"replay-{uuid.uuid4().hex[:8]}"
            provider = PaymentProviderServer(free_port())
            provider.start()
            settings = Settings(
                temporal_address=temporal.address,
                temporal_task_queue=task_queue,
                database_url=db_url,
                smtp_port=free_port(),
                payments_url=provider.url,
            )
            async with AsyncConnectionPool(db_url, min_size=1, max_size=8, open=False) as pool:
                await pool.wait()
                releasing = asyncio.create_task(release_waiters(db_url, client))
                async with build_worker(client, settings, pool):
                    recorder = Recorder(client, db_url, task_queue, out)
                    recorder.provider = provider
                    for group in groups:
                        await SCENARIOS[group](recorder)
                releasing.cancel()
        finally:
            temporal.stop()
            pg.stop("immediate")


def main(run: Callable[..., Awaitable[None]] = record) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("label", help="folder under tests/replay/histories, e.g. v8")
    parser.add_argument(
        "--scenarios",
        choices=["all", *SCENARIOS],
        default="all",
        help="which workflows' scenarios to record (default: all)",
    )
    args = parser.parse_args()
    asyncio.run(run(args.label, tuple(SCENARIOS) if args.scenarios == "all" else (args.scenarios,)))


if __name__ == "__main__":
    main()
