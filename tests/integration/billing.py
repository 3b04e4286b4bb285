"""The monthly-billing job as the integration tests and the chaos bench (bench/chaos.py)
run it: the catalog's job, test-sized and paused, its September 2026 subscriptions, and a
backfill of its one slot."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import psycopg
from temporalio.client import Client, ScheduleBackfill, ScheduleOverlapPolicy

from schedules.catalog.model import JobSpec, default_catalog
from tests.integration.jobs import takeover_retry

JOB = "monthly-billing"
# 03:00 America/New_York on 1 October 2026 (EDT): bills September 2026.
SLOT = datetime(2026, 10, 1, 7, 0, tzinfo=UTC)
MONTH = date(2026, 9, 1)
WORKFLOW_ID = f"{JOB}-{SLOT:%Y-%m-%dT%H:%M:%SZ}"


def billing_job(**params) -> JobSpec:
    """The catalog's monthly-billing job, paused (only backfills run it), test-sized."""
    job = default_catalog()[JOB]
    return job.model_copy(
        update={
            "paused": True,
            "params": job.params | {"charge_batch": 5, "concurrency": 2} | params,
            "heartbeat": timedelta(seconds=3),
            # A frozen worker's open polls absorb a few attempts.
            "retry": takeover_retry(10),
        }
    )


def subscribe(db: psycopg.Connection, n: int, *, declined_every: int = 0) -> int:
    """`n` subscriptions active in September 2026 (every `declined_every`-th card declines),
    plus one that ended before it and one that starts after it; returns `n`."""
    db.execute(
        """
        INSERT INTO subscriptions (customer_email, plan, amount_cents, started_on, ended_on,
                                   payment_method)
        SELECT 'sub' || k || '@example.com', 'team', 1000 + k, '2026-01-01', NULL,
               CASE WHEN %(every)s > 0 AND k %% %(every)s = 0
                    THEN 'pm_decline_insufficient_funds' ELSE 'pm_card_' || k END
        FROM generate_series(1, %(n)s) AS k
        """,
        {"n": n, "every": declined_every},
    )
    db.execute(
        """
        INSERT INTO subscriptions (customer_email, plan, amount_cents, started_on, ended_on,
                                   payment_method)
        VALUES ('gone@example.com', 'team', 500, '2026-01-01', '2026-08-31', 'pm_card_gone'),
               ('later@example.com', 'team', 500, '2026-10-15', NULL, 'pm_card_later')
        """
    )
    return n


async def backfill(client: Client, job: str = JOB) -> None:
    await client.get_schedule_handle(job).backfill(
        ScheduleBackfill(
            start_at=SLOT - timedelta(minutes=1),
            end_at=SLOT + timedelta(minutes=1),
            overlap=ScheduleOverlapPolicy.ALLOW_ALL,
        )
    )
