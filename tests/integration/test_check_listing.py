"""`check` reads the schedules `sync` wrote from one listing, and describes the rest.

Against the real Temporal dev server: what the listing vouches for (`listed_states`) must be
what describing each schedule says (`describe_states`), and a job whose catalog timing is no
longer the one its schedule was stamped with must not be taken from the listing.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from schedules.catalog.model import parse_catalog
from schedules.health.check_run import describe_states, listed_states, load_schedules
from schedules.sync.apply import sync


def tables(prefix: str, yearly_cron: str) -> dict[str, dict]:
    base = {"description": "t", "owner": "tests", "kind": "invoice-reminders", "timezone": "UTC"}
    return {
        f"{prefix}-paused": base | {"cron": "0 * * * *", "paused": True, "note": "held"},
        # Bounded: its first fire time is decades away, so it never fires during the test.
        f"{prefix}-later": base
        | {
            "cron": yearly_cron,
            "timezone": "Europe/Berlin",
            "start_at": datetime(2090, 1, 1, tzinfo=UTC),
        },
    }


async def test_the_listing_vouches_for_synced_schedules_as_describing_them_does(client, task_queue):
    prefix = f"listing-{uuid.uuid4().hex[:10]}"
    jobs = parse_catalog(tables(prefix, "0 6 1 1 *"))
    ids = [job.id for job in jobs]
    await sync(client, jobs, task_queue, prune=False)  # returns once the listing shows it
    try:
        await check_listing(client, prefix, jobs, ids)
    finally:  # the session's server holds every test's schedules: leave none behind
        for job_id in ids:
            await client.get_schedule_handle(job_id).delete()


async def check_listing(client, prefix: str, jobs, ids: list[str]) -> None:

    listed = await listed_states(client, jobs, timeout=30)
    described = await describe_states(client, ids, timeout=30)
    assert sorted(listed) == sorted(ids)
    for job_id in ids:
        got, want = listed[job_id], described[job_id]
        assert (got.exists, got.managed, got.paused) == (True, True, want.paused)
        assert want.timing_since is not None and got.timing_since == want.timing_since
    assert listed[f"{prefix}-paused"].paused
    later = listed[f"{prefix}-later"]
    assert later.next_action_times[:1] == described[f"{prefix}-later"].next_action_times[:1]
    assert later.next_action_times[0] == datetime(2090, 1, 1, 5, 0, tzinfo=UTC)  # 06:00 CET

    # The catalog now has another timing for one job, not synced yet: its schedule's stamp
    # is for the old timing, so that job is described, not taken from the listing.
    edited = parse_catalog(tables(prefix, "30 6 1 1 *"))
    assert sorted(await listed_states(client, edited, timeout=30)) == [f"{prefix}-paused"]
    states = await load_schedules(client, edited, timeout=30)
    assert states[f"{prefix}-later"] == described[f"{prefix}-later"]
