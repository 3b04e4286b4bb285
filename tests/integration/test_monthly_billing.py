"""Monthly billing, a workflow job of four steps, end to end: real schedule, real worker
processes, real Postgres and a real local payment provider (devstack/payments.py)."""

from __future__ import annotations

import signal
import uuid
from datetime import timedelta

import psycopg
import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from core.errors import CatalogError
from devstack import free_port
from devstack.payments import PaymentProviderServer
from schedules.catalog.model import parse_catalog
from tests.helpers import assert_eventually, wait_for_text
from tests.helpers.audit import audited
from tests.integration.billing import (
    JOB,
    MONTH,
    SLOT,
    WORKFLOW_ID,
    backfill,
    billing_job,
    subscribe,
)
from tests.integration.jobs import executions, registered
from worker.migrate import load_migrations


@pytest.fixture
def provider():
    server = PaymentProviderServer(free_port())
    server.start()
    yield server
    server.stop()


def counts(db: psycopg.Connection) -> dict[str, int]:
    (invoices, paid, void, charged, declined, receipts) = db.execute(
        """
        SELECT (SELECT count(*) FROM invoices WHERE billing_month = %(m)s),
               (SELECT count(*) FROM invoices WHERE billing_month = %(m)s AND status = 'Paid'),
               (SELECT count(*) FROM invoices WHERE billing_month = %(m)s AND status = 'Void'),
               (SELECT count(*) FROM charges WHERE billing_month = %(m)s AND status = 'charged'),
               (SELECT count(*) FROM charges WHERE billing_month = %(m)s AND status = 'declined'),
               (SELECT count(*) FROM outbox_messages WHERE type = 'PaymentReceipt')
        """,
        {"m": MONTH},
    ).fetchone()
    return {
        "invoices": invoices,
        "paid": paid,
        "void": void,
        "charged": charged,
        "declined": declined,
        "receipts": receipts,
    }


def all_charged(active: int) -> dict[str, int]:
    """`counts` once each of `active` subscriptions' invoices was charged and receipted."""
    return dict.fromkeys(("invoices", "paid", "charged", "receipts"), active) | {
        "void": 0,
        "declined": 0,
    }


async def closed_runs(client: Client, task_queue: str, job: str = JOB) -> list:
    """This test's closed runs of the slot (other tests ran the same slot on other queues)."""
    query = f"WorkflowId = '{job}-{SLOT:%Y-%m-%dT%H:%M:%SZ}' AND TaskQueue = '{task_queue}'"
    return [
        w async for w in client.list_workflows(query) if w.status != WorkflowExecutionStatus.RUNNING
    ]


async def wait_closed(
    client: Client, task_queue: str, n: int = 1, timeout: float = 120, job: str = JOB
) -> list:
    async def closed():
        runs = await closed_runs(client, task_queue, job)
        assert len(runs) >= n, runs
        return runs

    return await assert_eventually(closed, timeout=timeout)


def steps(db: psycopg.Connection) -> dict[str, dict]:
    cur = db.cursor(row_factory=psycopg.rows.dict_row)
    rows = cur.execute(
        "SELECT s.* FROM job_steps s JOIN job_executions e ON e.id = s.execution_id "
        "WHERE e.job_name = %s",
        (JOB,),
    ).fetchall()
    return {row["step"]: row for row in rows}


def env(provider: PaymentProviderServer) -> dict[str, str]:
    return {"PAYMENTS_URL": provider.url}


async def test_a_backfilled_month_bills_each_subscription_once_and_a_second_changes_nothing(
    client, db, database_url, task_queue, start_workers, provider
):
    active = subscribe(db, 40, declined_every=8)
    start_workers(2, **env(provider))
    async with registered(client, billing_job(), task_queue):
        await backfill(client)
        (run,) = await wait_closed(client, task_queue)
        assert run.status == WorkflowExecutionStatus.COMPLETED

        (row,) = executions(db, JOB)
        assert row["status"] == "completed", row["error"]
        declined = active // 8
        expected = {
            "invoices": active,
            "paid": active - declined,
            "void": 0,
            "charged": active - declined,
            "declined": declined,
            "receipts": active - declined,
        }
        assert counts(db) == expected
        assert row["result"]["counts"]["charge_invoices.charged"] == active - declined
        assert row["result"]["steps"] == [
            "open_billing_run",
            "generate_invoices",
            "charge_invoices",
            "queue_receipts",
        ]
        assert {name: s["status"] for name, s in steps(db).items()} == dict.fromkeys(
            row["result"]["steps"], "completed"
        )
        # Each invoice was sent to the provider once, keyed by its number.
        assert sorted(provider.keys()) == sorted(
            r[0]
            for r in db.execute(
                "SELECT invoice_number FROM invoices WHERE billing_month = %s", (MONTH,)
            )
        )
        assert set(provider.charged().values()) == {1}
        (status,) = db.execute(
            "SELECT status FROM billing_runs WHERE month = %s", (MONTH,)
        ).fetchone()
        assert status == "closed"

        # The same month backfilled again: the slot is completed; nothing changes.
        sent = len(provider.keys())
        await backfill(client)
        await wait_closed(client, task_queue, n=2)
        assert counts(db) == expected
        assert len(provider.keys()) == sent
        (row,) = executions(db, JOB)
        assert row["status"] == "completed" and row["duplicate_runs"] == 1
        window = {"start": SLOT, "end": SLOT + timedelta(seconds=1), "every_fire_time": True}
        await audited(client, database_url, task_queue, [billing_job()], **window)


async def test_the_provider_down_for_good_voids_the_uncharged_and_the_month_can_be_billed_again(
    client, db, task_queue, start_workers, provider
):
    active = subscribe(db, 30)
    provider.fail_with(503, after=10)  # ten charges go through, then the provider is down
    start_workers(1, **env(provider))
    async with registered(client, billing_job(), task_queue):
        await backfill(client)
        (run,) = await wait_closed(client, task_queue)
        assert run.status == WorkflowExecutionStatus.FAILED

        (row,) = executions(db, JOB)
        assert row["status"] == "compensated"
        assert "step 3 of 4 did not finish" in row["error"]
        assert "compensated generate_invoices, open_billing_run" in row["error"]
        assert row["result"]["compensated"] == ["generate_invoices", "open_billing_run"]
        # Exactly the uncharged invoices are voided; the charged stay charged; no receipts.
        assert counts(db) == {
            "invoices": active,
            "paid": 10,
            "void": active - 10,
            "charged": 10,
            "declined": 0,
            "receipts": 0,
        }
        undo = steps(db)["undo:generate_invoices"]
        assert undo["result"]["counts"] == {"voided": active - 10, "charged": 10, "looked_up": 0}
        assert len(undo["result"]["charged_invoices"]) == 10
        (status,) = db.execute(
            "SELECT status FROM billing_runs WHERE month = %s", (MONTH,)
        ).fetchone()
        assert status == "reopened"

        # The provider is back: billing the month again charges the rest, once each, and
        # sends a receipt for every charged invoice, the earlier ten included.
        provider.recover()
        await backfill(client)
        runs = await wait_closed(client, task_queue, n=2)
        assert max(runs, key=lambda r: r.start_time).status == WorkflowExecutionStatus.COMPLETED
        (row,) = executions(db, JOB)
        assert row["status"] == "completed", row["error"]
        assert counts(db) == all_charged(active)
        assert set(provider.charged().values()) == {1}


async def test_a_worker_killed_while_charging_resumes_at_step_3_on_another_and_charges_once(
    client, db, database_url, task_queue, start_workers, provider
):
    active = subscribe(db, 30)
    provider.hold()  # the first charge waits: the kill lands while it is in flight
    (first,) = start_workers(1, **env(provider))
    async with registered(client, billing_job(), task_queue):
        await backfill(client)
        await assert_eventually(_arrived(provider), timeout=60)
        before = steps(db)
        assert before["open_billing_run"]["status"] == "completed"
        assert before["generate_invoices"]["status"] == "completed"
        first.signal(signal.SIGKILL)
        first.process.wait(30)

        start_workers(1, **env(provider))
        provider.release()
        (run,) = await wait_closed(client, task_queue)
        assert run.status == WorkflowExecutionStatus.COMPLETED
        after = steps(db)
        # Steps 1 and 2 were not run again: their records are the first worker's.
        for name in ("open_billing_run", "generate_invoices"):
            assert after[name]["finished_at"] == before[name]["finished_at"]
            assert after[name]["attempt"] == before[name]["attempt"]
        assert after["charge_invoices"]["attempt"] > before["charge_invoices"]["attempt"]
        assert counts(db) | {"void": 0} == all_charged(active)
        # Every invoice charged once; a repeat (the killed batch) carried the same key.
        assert set(provider.charged().values()) == {1}
        assert set(provider.keys()) == set(provider.charged())
        window = {"start": SLOT, "end": SLOT + timedelta(seconds=1), "every_fire_time": True}
        await audited(client, database_url, task_queue, [billing_job()], **window)


async def test_a_stale_charging_attempt_commits_nothing(
    client, db, task_queue, start_workers, provider
):
    active = subscribe(db, 20)
    provider.hold()
    (frozen,) = start_workers(1, **env(provider))
    async with registered(client, billing_job(), task_queue):
        await backfill(client)
        await assert_eventually(_arrived(provider), timeout=60)
        frozen.signal(signal.SIGSTOP)  # mid-batch, between its requests and its record
        start_workers(1, **env(provider))
        # The frozen attempt's heartbeat times out; the step is retried on the new worker.
        stepped = steps(db)["charge_invoices"]["attempt"]

        async def taken_over():
            assert steps(db)["charge_invoices"]["attempt"] > stepped

        await assert_eventually(taken_over, timeout=60)
        provider.release()
        (run,) = await wait_closed(client, task_queue)
        assert run.status == WorkflowExecutionStatus.COMPLETED
        settled = counts(db)

        # It wakes with its answers. Either its record is refused by the fence (its token
        # is stale), or its heartbeat learns first that the attempt timed out; both ways it
        # must commit nothing.
        frozen.signal(signal.SIGCONT)
        wait_for_text(frozen.log, ("is stale", "Activity cancelled"), timeout=60)
        assert counts(db) == settled == all_charged(active)
        assert set(provider.charged().values()) == {1}


def _arrived(provider: PaymentProviderServer):
    async def check():
        assert provider.arrived.is_set()

    return check


async def test_a_cancelled_run_finishes_its_batch_then_compensates(
    client, db, task_queue, start_workers, provider
):
    active = subscribe(db, 30)
    provider.hold()  # the first batch's requests wait at the provider
    (worker,) = start_workers(1, **env(provider))
    async with registered(client, billing_job(), task_queue):
        await backfill(client)
        await assert_eventually(_arrived(provider), timeout=60)
        # An operator cancels the run (the Temporal UI's Request Cancellation); the step
        # hears of it at its next heartbeat, while its batch is in flight.
        await client.get_workflow_handle(WORKFLOW_ID).cancel()
        wait_for_text(worker.log, "step cancelled: finishing its batch", timeout=60)
        provider.release()
        (run,) = await wait_closed(client, task_queue)
        assert run.status == WorkflowExecutionStatus.CANCELED

        (row,) = executions(db, JOB)
        assert row["status"] == "compensated"
        assert "the run was cancelled" in row["error"]
        assert row["result"]["compensated"] == ["generate_invoices", "open_billing_run"]
        # The batch in flight was answered and recorded: its charges stand; every other
        # invoice is voided, and nothing is left pending.
        charged = counts(db)["charged"]
        assert 0 < charged < active
        assert counts(db) == {
            "invoices": active,
            "paid": charged,
            "void": active - charged,
            "charged": charged,
            "declined": 0,
            "receipts": 0,
        }
        (pending,) = db.execute("SELECT count(*) FROM charges WHERE status = 'pending'").fetchone()
        assert pending == 0
        assert sorted(provider.charged()) == sorted(
            r[0]
            for r in db.execute(
                "SELECT i.invoice_number FROM charges c JOIN invoices i ON i.id = c.invoice_id"
            )
        )


async def test_charges_cut_off_when_the_provider_dies_are_looked_up_before_anything_is_voided(
    client, db, task_queue, start_workers, provider
):
    """Issue 17, finding 2: the provider dies with charges on the wire (made, unanswered)
    and stays down past the step's retries. The re-sends fail to connect, which says nothing
    about the first sends: those charges stay pending, and the compensation voids nothing
    until the provider has answered a lookup of each. No invoice is left charged at the
    provider and Void here."""
    active = subscribe(db, 20)
    provider.hold_answers()  # the first charges are made; their answers never leave
    start_workers(1, **env(provider))
    async with registered(client, billing_job(), task_queue):
        await backfill(client)
        await assert_eventually(_made_a_charge(provider), timeout=60)
        provider.kill()
        # Every re-send is refused a connection: the step fails for good, and the run either
        # compensates without the provider (the fault) or waits for it to answer a lookup.
        await assert_eventually(_closed_or_looking_up(client, task_queue), timeout=180)
        voided_early = counts(db)["void"]
        provider.start()  # back, with its record of the charges it made
        (run,) = await wait_closed(client, task_queue)

        at_provider = set(provider.charged())
        assert at_provider, "the provider made no charge before it died"
        status = dict(
            db.execute(
                "SELECT invoice_number, status FROM invoices WHERE billing_month = %s", (MONTH,)
            ).fetchall()
        )
        charged_and_void = sorted(n for n in at_provider if status[n] == "Void")
        assert charged_and_void == [], f"charged at the provider, Void here: {charged_and_void}"
        assert voided_early == 0  # nothing was voided while the provider could not say
        assert run.status == WorkflowExecutionStatus.FAILED
        (row,) = executions(db, JOB)
        assert row["status"] == "compensated"
        assert {n: status[n] for n in at_provider} == dict.fromkeys(at_provider, "Paid")
        assert counts(db) == {
            "invoices": active,
            "paid": len(at_provider),
            "void": active - len(at_provider),
            "charged": len(at_provider),
            "declined": 0,
            "receipts": 0,
        }
        undo = steps(db)["undo:generate_invoices"]
        assert undo["result"]["counts"]["looked_up"] >= len(at_provider)
        (pending,) = db.execute("SELECT count(*) FROM charges WHERE status = 'pending'").fetchone()
        assert pending == 0
        assert set(provider.charged().values()) == {1}


def _made_a_charge(provider: PaymentProviderServer):
    async def check():
        assert provider.charged()

    return check


def _closed_or_looking_up(client: Client, task_queue: str):
    """Done once the run closed, or its compensation retries a lookup the provider cannot
    answer (the undo of generate_invoices past its first attempt)."""

    async def check():
        if await closed_runs(client, task_queue):
            return
        described = await client.get_workflow_handle(f"{WORKFLOW_ID}/steps").describe()
        attempts = [
            a.attempt
            for a in described.raw_description.pending_activities
            if a.activity_type.name == "void_uncharged_invoices"
        ]
        assert attempts and max(attempts) >= 2, attempts

    return check


def longest_accepted_id() -> str:
    """The longest job id the catalog takes (found by asking it, not by its constant)."""
    for size in range(1000, 0, -1):
        job_id = "b" * size
        try:
            parse_catalog({job_id: {"kind": JOB, "cron": "0 3 1 * *", "timezone": "UTC"}})
        except CatalogError:
            continue
        return job_id
    raise AssertionError("the catalog takes no id at all")


async def test_a_workflow_job_with_the_longest_id_the_catalog_takes_runs_to_the_end(
    client, db, task_queue, start_workers
):
    """Issue 17, finding 4: a workflow kind's job whose id is as long as the catalog
    allows syncs, is triggered, and completes; the engine's longest id, its steps child
    `<id>-<scheduled time>Z/steps`, fits Temporal's limit (1000)."""
    job_id = longest_accepted_id()
    child = f"{job_id}-{SLOT:%Y-%m-%dT%H:%M:%SZ}/steps"
    assert len(child) <= 1000, f"a {len(job_id)}-character id makes a {len(child)}-character child"
    start_workers(1)
    job = billing_job().model_copy(update={"id": job_id})
    async with registered(client, job, task_queue):
        await client.get_schedule_handle(job_id).trigger()

        async def completed():
            rows = executions(db, job_id)
            assert [row["status"] for row in rows] == ["completed"], rows

        await assert_eventually(completed, timeout=120)


async def test_two_jobs_of_the_billing_kind_each_claim_the_month_and_bill_a_subscription_once(
    client, db, task_queue, start_workers, provider
):
    """Issue 17, finding 4: `billing_runs` was keyed by the month alone, so a second job of
    kind monthly-billing was refused the month the first had billed. Each job claims its
    own (job, month); a subscription is still invoiced and charged once."""
    active = subscribe(db, 10)
    second = billing_job().model_copy(update={"id": f"{JOB}-second"})
    start_workers(1, **env(provider))
    async with (
        registered(client, billing_job(), task_queue),
        registered(client, second, task_queue),
    ):
        await backfill(client)
        (run,) = await wait_closed(client, task_queue)
        assert run.status == WorkflowExecutionStatus.COMPLETED
        await backfill(client, second.id)
        (run,) = await wait_closed(client, task_queue, job=second.id)

        (row,) = executions(db, second.id)
        assert (row["status"], row["error"]) == ("completed", None)
        assert run.status == WorkflowExecutionStatus.COMPLETED
        assert row["result"]["counts"]["generate_invoices.invoices"] == 0
        runs = db.execute(
            "SELECT job_name, status FROM billing_runs WHERE month = %s ORDER BY job_name",
            (MONTH,),
        ).fetchall()
        assert runs == [(JOB, "closed"), (second.id, "closed")]
        (owners,) = db.execute(
            "SELECT array_agg(DISTINCT billing_job) FROM invoices WHERE billing_month = %s",
            (MONTH,),
        ).fetchone()
        assert owners == [JOB]
        assert counts(db) == all_charged(active)
        assert len(provider.charged()) == active and set(provider.charged().values()) == {1}


def test_migration_0016_gives_each_billing_run_and_invoice_its_job(postgres):
    """The month a release before 0016 billed keeps its run and invoices, now its job's; a
    worker of that release (writing neither column) still gets them filled."""
    url = postgres.create_database(f"billing_0016_{uuid.uuid4().hex[:8]}")
    before, (per_job,) = (
        [m for m in load_migrations() if m.version < 16],
        [m for m in load_migrations() if m.version == 16],
    )
    with psycopg.connect(url, autocommit=True) as conn:
        for migration in before:
            conn.execute(migration.sql)
        (execution,) = conn.execute(
            "INSERT INTO job_executions (job_name, scheduled_at, status, attempt, origin) "
            "VALUES ('billing-eu', %s, 'completed', 1, 'scheduled') RETURNING id",
            (SLOT,),
        ).fetchone()
        conn.execute(
            "INSERT INTO billing_runs (month, execution_id, status) VALUES (%s, %s, 'open')",
            (MONTH, execution),
        )
        conn.execute(
            "INSERT INTO subscriptions (customer_email, plan, amount_cents, started_on, "
            "payment_method) VALUES ('a@example.com', 'team', 900, '2026-01-01', 'pm_card_a')"
        )
        old_invoice = (
            "INSERT INTO invoices (invoice_number, customer_email, status, due_date, "
            "amount_cents, subscription_id, billing_month) "
            "SELECT %s, 'a@example.com', 'Unpaid', '2026-10-15', 900, id, %s FROM subscriptions"
        )
        conn.execute(old_invoice, ("SUB-202609-00000001", MONTH))
        conn.execute(
            "INSERT INTO invoices (invoice_number, customer_email, status, due_date) "
            "VALUES ('INV-1', 'b@example.com', 'Unpaid', '2026-10-15')"
        )

        conn.execute(per_job.sql)
        assert conn.execute("SELECT job_name, month FROM billing_runs").fetchall() == [
            ("billing-eu", MONTH)
        ]
        assert dict(conn.execute("SELECT invoice_number, billing_job FROM invoices")) == {
            "SUB-202609-00000001": "billing-eu",
            "INV-1": None,
        }
        # The previous release's statements, during a rolling deploy.
        conn.execute("DELETE FROM invoices WHERE billing_month IS NOT NULL")
        conn.execute(old_invoice, ("SUB-202609-00000001", MONTH))
        (job,) = conn.execute("SELECT billing_job FROM invoices WHERE billing_month = %s", (MONTH,))
        assert job == ("billing-eu",)
        conn.execute("DELETE FROM invoices WHERE billing_month IS NOT NULL")
        conn.execute("DELETE FROM billing_runs")
        conn.execute(
            "INSERT INTO billing_runs (month, execution_id, status) VALUES (%s, %s, 'open')",
            (MONTH, execution),
        )
        assert conn.execute("SELECT job_name FROM billing_runs").fetchall() == [("billing-eu",)]
