"""A tenant's schedules name only its own resources (issue 36, item 2).

`weekly-report` declares that its `customer_id` names a customer of the schedule's tenant
(`RuntimeKind.owns`, `activities.runtime.ownership.TenantRow`): every route by which params reach
a run refuses another tenant's customer, or a missing one, alike, in one line, exit 2,
nothing written (create, import, update, apply; trigger and backfill of a schedule whose
customer moved to another tenant since), and a slot whose customer moved before it ran
fails having done nothing: no report, no email; the ledger, `explain` and the audit say
so.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from core.errors import InvalidScheduleError
from schedules import tenants
from tests.integration import runtime
from tests.integration.runtime import customer
from tests.integration.test_runtime_batch import weekly_batch
from tests.integration.test_runtime_schedules_cli import cli, one_error_line, rows

pytestmark = pytest.mark.timeout(240)

_NOW = datetime.now(UTC)
T0 = _NOW.replace(second=0, microsecond=0) - timedelta(hours=2)
LATE = timedelta(days=1)  # the clock is two hours behind: the run is claimed that late
WRITES = ("runtime_schedules", "runtime_schedule_changes", "runtime_dispatch_intents")


def weekly(tenant: str, customer_id: int, name: str = "weekly") -> dict:
    return {"tenant": tenant, "name": name, "kind": "weekly-report", "cron": "0 8 * * 1",
            "timezone": "UTC", "params": {"customer_id": customer_id}}  # fmt: skip


def refusal(tenant: str, customer_id: int, name: str = "weekly") -> str:
    return (
        f"schedule {tenant!r}/{name!r}: params.customer_id: names no customer of tenant "
        f"{tenant!r} (got {customer_id})"
    )


def written(database_url: str) -> tuple[int, ...]:
    return tuple(rows(database_url, table) for table in WRITES)


def test_create_update_and_import_refuse_another_tenants_customer(db, database_url, tmp_path):
    acme, globex = customer(db, "acme", "UTC"), customer(db, "globex", "UTC")
    missing = globex + 1000  # no such customer: answered as another tenant's is
    for cid in (globex, missing):
        done = cli(
            database_url,
            *("create", "--tenant", "acme", "--name", "weekly", "--kind", "weekly-report"),
            *("--cron", "0 8 * * 1", "--timezone", "UTC", "--params", f'{{"customer_id": {cid}}}'),
        )
        assert done.returncode == 2
        assert one_error_line(done) == f"error: {refusal('acme', cid)}"
    assert written(database_url) == (0, 0, 0)
    made = cli(
        database_url,
        *("create", "--tenant", "acme", "--name", "weekly", "--kind", "weekly-report"),
        *("--cron", "0 8 * * 1", "--timezone", "UTC", "--params", f'{{"customer_id": {acme}}}'),
    )
    assert made.returncode == 0, made.stderr
    sid = made.stdout.split()[1].removeprefix("rt-")
    before = written(database_url)
    moved = cli(
        database_url, "update", sid, "--version", "1", "--params", f'{{"customer_id": {globex}}}'
    )
    assert moved.returncode == 2
    assert one_error_line(moved) == f"error: {refusal('acme', globex)}"
    path = tmp_path / "lines.jsonl"
    path.write_text(
        json.dumps(weekly("globex", globex)) + "\n" + json.dumps(weekly("acme", globex, "x")) + "\n"
    )
    imported = cli(database_url, "import", str(path))
    assert imported.returncode == 2
    assert one_error_line(imported) == (
        f"error: line 2: {refusal('acme', globex, 'x')}; nothing was written"
    )
    assert written(database_url) == before


async def test_apply_refuses_another_tenants_customer(db, database_url):
    acme, globex = customer(db, "acme", "UTC"), customer(db, "globex", "UTC")
    desired = [weekly("acme", acme), weekly("acme", globex, "stolen")]
    for dry_run in (True, False):
        with pytest.raises(InvalidScheduleError) as refused:
            await tenants.apply(database_url, "acme", desired, dry_run=dry_run)
        assert str(refused.value) == refusal("acme", globex, "stolen")
    assert written(database_url) == (0, 0, 0)
    assert (await tenants.apply(database_url, "acme", desired[:1])).created == ["weekly"]


def test_trigger_and_backfill_refuse_a_schedule_whose_customer_moved(db, database_url, temporal):
    runtime.fresh_ids(db)  # were it started, its run's id would be no other test's
    acme = customer(db, "acme", "UTC")
    made = cli(
        database_url,
        *("create", "--tenant", "acme", "--name", "weekly", "--kind", "weekly-report"),
        *("--cron", "0 8 * * 1", "--timezone", "UTC", "--params", f'{{"customer_id": {acme}}}'),
        *("--paused", "--note", "test: trigger and backfill only"),
    )
    assert made.returncode == 0, made.stderr
    sid = made.stdout.split()[1].removeprefix("rt-")
    db.execute("UPDATE customers SET tenant = 'initech' WHERE id = %s", (acme,))  # moved
    before = written(database_url)
    env = {"TEMPORAL_ADDRESS": temporal.address}
    for args in (
        ("trigger", sid),
        ("backfill", sid, "--start", "2026-01-05", "--end", "2026-01-13"),
    ):
        done = cli(database_url, *args, **env)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert one_error_line(done) == f"error: {refusal('acme', acme)}"
    assert written(database_url) == before


async def test_a_slot_whose_customer_moved_before_it_ran_fails_having_sent_nothing(
    db, database_url, client, task_queue, start_workers
):
    start_workers(1)
    runtime.fresh_ids(db)
    acme = customer(db, "acme", "UTC")
    data = weekly("acme", acme) | {"paused": True, "note": "test: its trigger only"}
    made = (await tenants.create(database_url, data, clock=lambda: T0)).schedule
    slot = T0 + timedelta(minutes=1)
    # Recorded while the customer was acme's, started after it moved to another tenant.
    await tenants.trigger(database_url, made.id, clock=lambda: slot)
    db.execute("UPDATE customers SET tenant = 'initech' WHERE id = %s", (acme,))
    async with runtime.dispatcher(database_url, client, task_queue) as d:
        await runtime.tick_all(d, slot + timedelta(minutes=1))
        await runtime.settled(db, 1)
    (row,) = runtime.slot_rows(db, made.id)
    assert (row["scheduled_at"], row["status"], row["origin"]) == (slot, "failed", "manual")
    assert f"rt-{made.id}: params.customer_id: names no customer of tenant 'acme'" in row["error"]
    reports, emails = db.execute(
        "SELECT (SELECT count(*) FROM weekly_reports), (SELECT count(*) FROM outbox_messages)"
    ).fetchone()
    assert (reports, emails) == (0, 0)
    told = await tenants.explain(database_url, made.id, slot)
    assert told.verdict.startswith("failed (manual"), told.verdict
    assert "names no customer of tenant 'acme'" in told.verdict
    judged = await runtime.audit_clean(
        database_url, client, task_queue, T0, slot + timedelta(minutes=2), late=LATE
    )
    assert judged.rows == 1  # the failed slot is judged: settled, its run failed with it


async def test_a_batch_fails_the_slot_whose_customer_moved_alone(db, database_url):
    # A kind whose params name a tenant's resources may run in batches: each slot is
    # checked in the batch's transaction, and one that names another's fails alone.
    runtime.fresh_ids(db)
    minute = datetime.now(UTC).replace(second=0, microsecond=0)
    cids = [customer(db, f"t{i}", "UTC") for i in range(3)]
    once = {"next_fire_at": minute, "timing_since": minute, "end_at": minute}
    ids = [
        runtime.insert_schedule(db, **weekly(f"t{i}", cid) | {"cron": "* * * * *"}, **once)
        for i, cid in enumerate(cids)
    ]
    db.execute("UPDATE customers SET tenant = 'initech' WHERE id = %s", (cids[1],))
    done = await weekly_batch(db, database_url, ids, minute)
    assert (done.completed, done.failed) == (2, 1)
    statuses = [row["status"] for sid in ids for row in runtime.slot_rows(db, sid)]
    assert statuses == ["completed", "failed", "completed"]
    reported = db.execute(
        "SELECT array_agg(customer_id ORDER BY customer_id) FROM weekly_reports"
    ).fetchone()[0]
    mailed = db.execute(
        "SELECT array_agg(c ORDER BY c) FROM"
        " (SELECT (payload->>'customer_id')::bigint AS c FROM outbox_messages) o"
    ).fetchone()[0]
    assert reported == mailed == [cids[0], cids[2]]
