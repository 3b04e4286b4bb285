"""nightly-reconcile end to end: backfilled nights on a real schedule, worker and Postgres."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import psycopg
from temporalio.client import Client, ScheduleBackfill, ScheduleOverlapPolicy

from schedules.catalog.model import JobSpec, default_catalog
from tests.helpers import assert_eventually
from tests.helpers.audit import audit_report, audited, one_slot
from tests.integration.jobs import FAST_RETRY, executions, registered, runs_closed

JOB = "nightly-reconcile"
# 02:00 in New York the morning after each clock change of 2026, in UTC.
AFTER_FALL_BACK = datetime(2026, 11, 2, 7, 0, tzinfo=UTC)  # reconciles 2026-11-01: 25 hours
AFTER_SPRING_FORWARD = datetime(2026, 3, 9, 6, 0, tzinfo=UTC)  # reconciles 2026-03-08: 23 h
# The sync's clock: New York's 02:00 is compiled to UTC calendars, which cover the years from
# their clock's on. Synced with the wall clock, from 2027-01-01T05:00Z (New Year in New York)
# the schedule would fire nothing in 2026, and Temporal's backfill of these nights nothing.
SYNCED_AS_OF = datetime(2026, 12, 1, tzinfo=UTC)


def reconcile_job(job_id: str = JOB) -> JobSpec:
    """The catalog's nightly-reconcile job (threshold $1.00), with fast retries.

    Paused: its nightly cron must add no run of its own to the test's backfilled ones
    (a backfill still runs a paused schedule).
    """
    job = default_catalog()[JOB]
    assert job.params["threshold_cents"] == 100
    return job.model_copy(
        update={
            "id": job_id,
            "retry": FAST_RETRY,
            "paused": True,
            "note": "test: backfilled runs only",
            "depends_on": [],  # its hourly-sync upstream is tests/integration/test_dependencies.py's
        }
    )


def settle(db: psycopg.Connection, cents: int, settled_at: str, currency: str = "USD") -> None:
    """A payment settled at `settled_at` (ISO 8601 with offset)."""
    db.execute(
        "INSERT INTO card_payments (amount_cents, currency, status, captured_at, settled_at)"
        " VALUES (%s, %s, 'settled', %s::timestamptz - interval '1 minute', %s)",
        (cents, currency, settled_at, settled_at),
    )


def book(db: psycopg.Connection, cents: int, day: date, currency: str = "USD") -> None:
    db.execute(
        "INSERT INTO ledger_entries (booked_on, amount_cents, currency) VALUES (%s, %s, %s)",
        (day, cents, currency),
    )


def reconciliations(db: psycopg.Connection) -> list[dict]:
    cur = db.cursor(row_factory=psycopg.rows.dict_row)
    return cur.execute("SELECT * FROM reconciliations ORDER BY day").fetchall()


def alerts(db: psycopg.Connection) -> list[tuple]:
    return db.execute(
        "SELECT idempotency_key, payload FROM outbox_messages"
        " WHERE type = 'ReconciliationAlert' ORDER BY idempotency_key"
    ).fetchall()


async def backfill(client: Client, job_id: str, slot: datetime) -> None:
    await client.get_schedule_handle(job_id).backfill(
        ScheduleBackfill(
            start_at=slot - timedelta(minutes=1),
            end_at=slot + timedelta(minutes=1),
            overlap=ScheduleOverlapPolicy.ALLOW_ALL,
        )
    )


async def settled_runs(db: psycopg.Connection, job_id: str, n: int, duplicates: int = 0):
    async def done():
        rows = executions(db, job_id)
        assert len(rows) == n and all(r["status"] == "completed" for r in rows), rows
        assert sum(r["duplicate_runs"] for r in rows) == duplicates
        return rows

    return await assert_eventually(done, timeout=60)


def fall_back_day(db: psycopg.Connection) -> None:
    """2026-11-01 in New York: 04:00Z to 05:00Z the next day. Ledger $5.00 over payments."""
    day = date(2026, 11, 1)
    settle(db, 1000, "2026-11-01T00:30:00-04:00")  # first half hour of the day (EDT)
    settle(db, 2000, "2026-11-01T01:30:00-04:00")  # 01:30, the first time
    settle(db, 4000, "2026-11-01T01:30:00-05:00")  # 01:30 again, an hour later
    settle(db, 8000, "2026-11-01T23:30:00-05:00")  # 23:30 local: 04:30Z on 11-02, still day D
    settle(db, 16000, "2026-10-31T23:59:59-04:00")  # the day before
    settle(db, 32000, "2026-11-02T00:00:00-05:00")  # the day after, from its first instant
    settle(db, 64000, "2026-11-01T12:00:00-05:00", currency="EUR")  # another currency
    db.execute(  # captured on the day but not settled: not counted
        "INSERT INTO card_payments (amount_cents, currency, captured_at)"
        " VALUES (128000, 'USD', '2026-11-01T12:00:00-05:00')"
    )
    book(db, 10000, day)
    book(db, 5500, day)
    book(db, 16000, day - timedelta(days=1))
    book(db, 32000, day + timedelta(days=1))


def spring_forward_day(db: psycopg.Connection) -> None:
    """2026-03-08 in New York: 05:00Z to 04:00Z the next day. Ledger exactly $1.00 under."""
    day = date(2026, 3, 8)
    settle(db, 3000, "2026-03-08T00:00:00-05:00")  # the day's first instant
    settle(db, 5000, "2026-03-08T03:30:00-04:00")  # just after the gap
    settle(db, 7000, "2026-03-08T23:30:00-04:00")  # 03:30Z on 03-09, still day D
    settle(db, 9000, "2026-03-09T00:00:00-04:00")  # the day after
    book(db, 14900, day)
    book(db, 9000, day + timedelta(days=1))


async def test_a_backfilled_night_reconciles_its_previous_local_day_and_alerts_once(
    client, db, database_url, task_queue, start_workers
):
    fall_back_day(db)
    spring_forward_day(db)
    start_workers(1)
    job = reconcile_job()
    async with registered(client, job, task_queue, now=SYNCED_AS_OF):
        # One at a time: the bundled server can drop a schedule update that arrives close
        # behind another (see the operator commands in the README).
        await backfill(client, job.id, AFTER_FALL_BACK)
        await settled_runs(db, job.id, 1)
        await backfill(client, job.id, AFTER_SPRING_FORWARD)
        spring, fall = await settled_runs(db, job.id, 2)
        assert (spring["scheduled_at"], fall["scheduled_at"]) == (
            AFTER_SPRING_FORWARD,
            AFTER_FALL_BACK,
        )
        assert fall["result"]["counts"] == {
            "ledger_total": 15500,
            "payments_total": 15000,
            "discrepancy": 500,
            "stored": 1,
            "alerts": 1,
        }
        assert spring["result"]["counts"] == {
            "ledger_total": 14900,
            "payments_total": 15000,
            "discrepancy": -100,
            "stored": 1,
            "alerts": 0,  # |-100| does not exceed the 100 threshold
        }
        rows = reconciliations(db)
        assert [
            (r["day"], r["currency"], r["ledger_total"], r["payments_total"], r["discrepancy"])
            for r in rows
        ] == [
            (date(2026, 3, 8), "USD", 14900, 15000, -100),
            (date(2026, 11, 1), "USD", 15500, 15000, 500),
        ]
        assert [(r["job_name"], r["scheduled_at"]) for r in rows] == [
            (JOB, AFTER_SPRING_FORWARD),
            (JOB, AFTER_FALL_BACK),
        ]
        assert alerts(db) == [
            (
                "reconciliation-alert:USD:2026-11-01",
                {
                    "day": "2026-11-01",
                    "currency": "USD",
                    "ledger_total": 15500,
                    "payments_total": 15000,
                    "discrepancy": 500,
                    "threshold": 100,
                },
            )
        ]

        # The claim, the take-over, the work, the alert and the completion were one
        # transaction (now() is its start: the row's insert and completion share it), and
        # the audit judges the night clean from the evidence it wrote.
        assert fall["started_at"] == fall["finished_at"], fall
        journal = db.execute(
            "SELECT what, attempt, txid FROM commit_journal WHERE execution_id = %s ORDER BY seq",
            (fall["id"],),
        ).fetchall()
        (alert_txid,) = db.execute(
            "SELECT txid FROM outbox_messages WHERE execution_id = %s", (fall["id"],)
        ).fetchone()
        assert [(what, attempt) for what, attempt, _ in journal] == [
            ("take_over", 1),
            ("complete", 1),
        ]
        assert {txid for *_, txid in journal} == {alert_txid}
        window = one_slot(AFTER_FALL_BACK)
        report = await audit_report(client, database_url, task_queue, [job], **window)
        assert report.exit_code == 0 and report.rows == 1, report.findings

        # The same night again: the slot is already completed, a recorded no-op.
        await runs_closed(client, job.id, [AFTER_FALL_BACK])  # else the start is dropped
        await backfill(client, job.id, AFTER_FALL_BACK)
        await settled_runs(db, job.id, 2, duplicates=1)
        assert reconciliations(db) == rows
        assert len(alerts(db)) == 1
        for night in (AFTER_SPRING_FORWARD, AFTER_FALL_BACK):  # each backfilled night, once
            window = {"start": night, "end": night + timedelta(seconds=1)}
            await audited(client, database_url, task_queue, [job], **window, every_fire_time=True)

    # A second job reconciling the same night really runs: same totals, nothing changes.
    again = reconcile_job("nightly-reconcile-again")
    async with registered(client, again, task_queue, now=SYNCED_AS_OF):
        await backfill(client, again.id, AFTER_FALL_BACK)
        (rerun,) = await settled_runs(db, again.id, 1)
        assert rerun["result"]["counts"] == fall["result"]["counts"] | {"stored": 0, "alerts": 0}
        assert reconciliations(db) == rows  # checked_at and the writing run included
        assert len(alerts(db)) == 1
