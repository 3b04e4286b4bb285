"""Slots requested through the HTTP API run on the fleet, read back through it, and the
audit of the runtime schedules finds nothing (issue 38: every test that runs slots
through the API ends with `audit` clean)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.helpers.api import LiveApi
from tests.integration.runtime import audit_clean, dispatcher, fresh_ids, settled, tick_all

pytestmark = pytest.mark.timeout(240)
HOURLY = {
    "name": "hourly",
    "kind": "test-noop",
    "cron": "0 * * * *",
    "timezone": "UTC",
    "paused": True,  # only the slots the test asks for run
    "note": "triggered and backfilled only",
}


def iso(instant: datetime) -> str:
    return instant.isoformat().replace("+00:00", "Z")


async def test_a_trigger_and_a_backfill_through_the_api_run_once_each_and_audit_clean(
    api: LiveApi, db, database_url, client, task_queue, start_workers
):
    start_workers(1)
    fresh_ids(db)
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    window = {"start": iso(hour - timedelta(hours=2)), "end": iso(hour)}
    with api.client(await api.key("acme")) as http:
        made = http.post("/v1/schedules", json=HOURLY).json()
        url = f"/v1/schedules/{made['id']}"
        backfilled = http.post(f"{url}/backfill", json=window).json()
        assert backfilled["recorded"] == [iso(hour - timedelta(hours=h)) for h in (2, 1)]
        (manual,) = http.post(f"{url}/trigger").json()["recorded"]
    async with dispatcher(database_url, client, task_queue) as d:
        await tick_all(d, datetime.now(UTC))
        await settled(db, 3)
    with api.client(await api.key("acme")) as http:
        runs = http.get(f"{url}/runs").json()["runs"]
        assert sorted((r["origin"], r["status"]) for r in runs) == [
            ("backfill", "completed"),
            ("backfill", "completed"),
            ("manual", "completed"),
        ]
        assert http.get(f"{url}/explain", params={"slot": manual}).json()["ran"] is True
        again = http.post(f"{url}/backfill", json=window | {"dry_run": True}).json()
        assert (again["would_run"], len(again["already"])) == ([], 2)
    await audit_clean(
        database_url, client, task_queue, hour - timedelta(hours=3), datetime.now(UTC) + timedelta(minutes=1),
        late=timedelta(hours=3),
    )  # fmt: skip
