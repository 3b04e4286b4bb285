"""`python -m schedules verify` and sync's own check, on real dev servers.

- The shipped catalog, synced, verifies clean (exit 0); a schedule edited behind sync's back
  is caught (exit 1) with its dates and the cause, and `sync --full` puts it right.
- A server whose time zone database disagrees with the project's: `verify` says so, and a
  `sync` that wrote a job in calendars of that zone recompiles it to UTC calendars, checks
  again, and keeps it so on the next sync.

Each test has a namespace of its own; every schedule is paused (the shipped catalog is
synced from a copy with `paused = true` on each job; pausing changes no fire time).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from temporalio.client import Client, ScheduleCalendarSpec, ScheduleRange, ScheduleUpdate

from core.payloads import data_converter
from devstack import TemporalDevServer, free_port
from schedules.catalog.model import load_catalog, parse_catalog
from schedules.health.verify import verify_job
from schedules.sync.apply import sync
from tests.helpers import ROOT, python_m
from tests.integration.namespaces import fresh_namespace
from timing.zones import zoneinfo_dir

SHIPPED = ROOT / "schedules" / "jobs.toml"
ENGINE = ROOT / "schedules" / "engine.toml"


def cli(
    client: Client, *args: str, catalog: Path | None = None, database_url: str | None = None
) -> subprocess.CompletedProcess:
    """The command on `client`'s namespace; `database_url` for sync, which reads the
    dispatch shards in force from PostgreSQL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "DATABASE_"))}
    if database_url is not None:
        env["DATABASE_URL"] = database_url
    env.update(
        TEMPORAL_ADDRESS=client.service_client.config.target_host,
        TEMPORAL_NAMESPACE=client.namespace,
        TEMPORAL_TASK_QUEUE="verify-never-polled",
        PYTHONUNBUFFERED="1",
    )
    where = ["--catalog", str(catalog)] if catalog else []
    return python_m(["schedules", *where, *args], env, timeout=180)


def paused_copy(source: Path, target: Path) -> Path:
    """The catalog with every job paused (its timing untouched)."""
    lines = []
    for line in source.read_text().splitlines():
        lines.append(line)
        if line.startswith("[") and "." not in line:
            lines.append('paused = true\nnote = "verify test: never runs"')
    target.write_text("\n".join(lines) + "\n")
    shipped, copied = tomllib.loads(source.read_text()), tomllib.loads(target.read_text())
    for job_id, table in shipped.items():
        assert {k: v for k, v in copied[job_id].items() if k not in ("paused", "note")} == table
    return target


async def test_the_shipped_catalog_verifies_and_an_edit_behind_syncs_back_is_caught(
    client, database_url, tmp_path
):
    ns = await fresh_namespace(client, "verify")
    # Every job the fleet runs, the engine's restated (as a catalog may) to pause them too.
    shipped = tmp_path / "shipped.toml"
    shipped.write_text(SHIPPED.read_text() + "\n" + ENGINE.read_text())
    paused = paused_copy(shipped, tmp_path / "paused.toml")
    synced = cli(ns, "sync", catalog=paused, database_url=database_url)
    assert synced.returncode == 0, synced.stderr
    assert "verified" not in synced.stdout  # nothing needed recompiling

    clean = cli(ns, "verify")  # the shipped catalog itself
    assert clean.returncode == 0, clean.stdout + clean.stderr
    jobs = [job.id for job in load_catalog()]
    for job_id in jobs:
        assert f"ok          {job_id}: " in clean.stdout
    assert "0 diverge, 0 cannot tell" in clean.stdout and "tzdata 20" in clean.stdout

    def edit(update):  # 03:30 instead of 02:30, the way `temporal schedule update` would
        spec = update.description.schedule.spec
        spec.calendars = [
            ScheduleCalendarSpec(hour=(ScheduleRange(3),), minute=(ScheduleRange(30),))
        ]
        return ScheduleUpdate(schedule=update.description.schedule)

    await ns.get_schedule_handle("invoice-reminders").update(edit)
    caught = cli(ns, "verify")
    assert caught.returncode == 1, caught.stdout + caught.stderr
    lines = caught.stdout.splitlines()
    (head,) = [line for line in lines if line.startswith("DIVERGES")]
    assert head.startswith("DIVERGES    invoice-reminders: ")
    # Every local date, with the intended and the server's times (London: GMT, then BST).
    assert any("intended 02:30 GMT (02:30Z); server 03:30 GMT (03:30Z)" in line for line in lines)
    assert any("intended 02:30 BST (01:30Z); server 03:30 BST (02:30Z)" in line for line in lines)
    assert "edited behind sync's back" in caught.stdout
    assert "1 diverge" in caught.stdout

    only_one = cli(ns, "verify", "nightly-reconcile", "--days", "30")
    assert only_one.returncode == 0 and "1 job(s)" in only_one.stdout

    unknown = cli(ns, "verify", "no-such-job")
    assert unknown.returncode == 2 and "unknown job(s) 'no-such-job'" in unknown.stderr

    repaired = cli(ns, "sync", "--full", catalog=paused, database_url=database_url)
    assert repaired.returncode == 0 and "updated       invoice-reminders" in repaired.stdout
    assert cli(ns, "verify").returncode == 0


async def test_verify_cannot_tell_without_a_schedule(client):
    ns = await fresh_namespace(client, "verify")
    missing = cli(ns, "verify", "weekly-cleanup")
    assert missing.returncode == 2
    assert "CANNOT TELL weekly-cleanup: no schedule on the server" in missing.stdout


# --- a server with another time zone database ---------------------------------------------


@pytest.fixture(scope="module")
async def other_database_server(tmp_path_factory):
    """A dev server whose `America/Chicago` is Denver's (an hour behind all year): a
    server whose database disagrees with the project's tzdata."""
    root = tmp_path_factory.mktemp("other-zoneinfo")
    zones = root / "zoneinfo"
    shutil.copytree(zoneinfo_dir(), zones)
    shutil.copyfile(zones / "America" / "Denver", zones / "America" / "Chicago")
    server = TemporalDevServer(free_port(), None, None, root / "temporal.log", zoneinfo=zones)
    server.start()
    try:
        await server.wait_ready()
        yield await Client.connect(server.address, data_converter=data_converter)
    finally:
        server.stop()


async def test_sync_recompiles_to_utc_where_the_servers_database_disagrees(
    other_database_server,
):
    client = other_database_server
    job_id = f"chicago-{uuid.uuid4().hex[:6]}"
    (job,) = parse_catalog(
        {
            job_id: {
                "kind": "invoice-reminders",
                "cron": "0 9 * * 1-5",
                "timezone": "America/Chicago",
                "paused": True,
            }
        }
    )
    # One clock for both syncs: the UTC calendars sync falls back to cover the years from
    # their clock's on, so a second sync after New Year in Chicago would rewrite the job.
    now = datetime.now(UTC)
    assert job.timing.spec(now).time_zone_name == "America/Chicago"  # local by evidence

    report = await sync(client, [job], "never-polled", prune=False, now=now)
    assert report.created == [job_id] and not report.unverified
    (note,) = report.verification
    assert note.startswith(f"{job_id}: the server fired other times than intended on ")
    assert "recompiled to UTC calendars and checked again" in note
    stored = (await client.get_schedule_handle(job_id).describe()).schedule.spec
    assert stored.time_zone_name == "UTC" and "server tz differs" in stored.calendars[0].comment

    again = await sync(client, [job], "never-polled", prune=False, full=True, now=now)
    assert again.ids("unchanged") == [job_id] and not again.verification

    # A schedule left in Chicago calendars (by an older sync, say): verify names the cause.
    # The clock as a parameter: a winter Monday at 00:00Z (Chicago CST 09:00 is 15Z, the
    # server's "Chicago", Denver's MST, fires at 16Z). With the wall clock, a run between
    # 15Z and 16Z on a weekday saw the day's 15Z fire already behind it, and a summer run
    # sees 14Z / 15Z.
    winter = datetime(2027, 1, 4, tzinfo=UTC)

    def back_to_local(update):
        update.description.schedule.spec = job.timing.spec(winter)
        return ScheduleUpdate(schedule=update.description.schedule)

    await client.get_schedule_handle(job_id).update(back_to_local)
    verdict = await verify_job(client, job, winter)
    assert verdict.status == "diverges"
    assert "the server's own time zone database gives America/Chicago other UTC offsets" in (
        verdict.why
    )
    first = verdict.divergences[0]
    assert [t.hour for t in first.intended] == [15] and [t.hour for t in first.server] == [16]
