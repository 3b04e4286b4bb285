"""`python -m schedules tenants ...` and JSON Lines import / export on a real PostgreSQL:
exit codes, one line per error and no traceback, JSON Lines out, idempotent import that
validates every line before writing anything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from core.errors import ConflictError, InvalidScheduleError, QuotaError
from schedules import tenants
from schedules.tenants import Quotas
from tests.helpers import ROOT


def cli(database_url: str, *args: str, stdin: str | None = None, **env: str):
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "TENANT_"))}
    environ.update(DATABASE_URL=database_url, PYTHONUNBUFFERED="1", **env)
    return subprocess.run(
        [sys.executable, "-m", "schedules", "tenants", *args],
        cwd=ROOT,
        env=environ,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def one_error_line(result) -> str:
    assert result.stdout == "" or "Traceback" not in result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def rows(url: str, table: str) -> int:
    with psycopg.connect(url) as conn:
        query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))
        return conn.execute(query).fetchone()[0]


def lines_of(n: int, tenant_count: int = 3) -> list[str]:
    zones = ["America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Tokyo"]
    return [
        json.dumps(
            {
                "tenant": f"t{i % tenant_count}",
                "name": f"report-{i}",
                "kind": "test-noop",
                "cron": f"{i % 60} {i % 24} * * {i % 7}",
                "timezone": zones[i % len(zones)],
                "params": {"label": f"customer {i}"},
                "catchup": ["skip", "latest"][i % 2],
                "paused": i % 5 == 0,
            }
        )
        for i in range(n)
    ]


def test_the_cli_writes_reads_and_refuses_with_its_exit_codes(database_url):
    created = cli(
        database_url,
        *("create", "--tenant", "acme", "--name", "weekly", "--kind", "test-noop"),
        *("--cron", "30 2 * * *", "--timezone", "America/New_York", "--params", '{"size": 2}'),
    )
    assert created.returncode == 0, created.stderr
    assert created.stdout.startswith("created rt-")
    sid = int(created.stdout.split()[1].removeprefix("rt-"))
    again = cli(
        database_url,
        *("create", "--tenant", "acme", "--name", "weekly", "--kind", "test-noop"),
        *("--cron", "30 2 * * *", "--timezone", "America/New_York", "--params", '{"size": 2}'),
    )
    assert again.returncode == 0 and again.stdout.startswith(f"exists rt-{sid} ")

    bad = cli(
        database_url,
        *("create", "--tenant", "acme", "--name", "x", "--kind", "test-noop"),
        *("--cron", "30 25 * * *", "--timezone", "America/New_York"),
    )
    assert bad.returncode == 2
    assert one_error_line(bad) == (
        "error: schedule 'acme'/'x': cron: hour '25' is out of range: 25 is not 0-23 "
        "(got '30 25 * * *')"
    )
    stale = cli(database_url, "update", str(sid), "--version", "5", "--cron", "0 3 * * *")
    assert stale.returncode == 1
    assert "expected version 5, but the current version is 1" in one_error_line(stale)
    unknown = cli(database_url, "pause", "rt-424242", "--note", "x")
    assert unknown.returncode == 2
    assert one_error_line(unknown) == "error: no runtime schedule has id 424242"
    usage = cli(database_url, "pause", "twelve", "--note", "x")
    assert usage.returncode == 2 and "must be a schedule id like 12 or rt-12" in usage.stderr

    cleared = cli(
        database_url,
        *("update", str(sid), "--version", "1", "--catchup", "all", "--max-missed", "3"),
    )
    assert cleared.returncode == 0 and cleared.stdout.startswith(f"updated rt-{sid} ")
    back = cli(
        database_url,
        *("update", str(sid), "--version", "2", "--catchup", "latest", "--clear", "max_missed"),
    )
    assert back.returncode == 0 and back.stdout.startswith(f"updated rt-{sid} ")
    paused = cli(database_url, "pause", str(sid), "--note", "card expired", "--by", "support")
    assert paused.returncode == 0 and "paused by support (card expired)" in paused.stdout
    listed = cli(database_url, "list", "--tenant", "acme", "--json")
    assert listed.returncode == 0
    (entry,) = [json.loads(line) for line in listed.stdout.splitlines()]
    assert (entry["id"], entry["paused_by"], entry["ledger_name"]) == (sid, "support", f"rt-{sid}")

    upcoming = cli(database_url, "next", str(sid), "-n", "400", "--json")
    assert upcoming.returncode == 0
    times = [json.loads(line) for line in upcoming.stdout.splitlines()]
    assert len(times) == 400
    flagged = [t for t in times if t["dst"]]
    assert any(t["dst"].startswith("spring forward: 02:30 does not exist") for t in flagged)

    runs = cli(database_url, "runs", str(sid), "--json")
    assert runs.returncode == 0 and runs.stdout == ""
    slot = times[0]["at"]
    with psycopg.connect(database_url) as conn:
        conn.execute(
            "INSERT INTO job_executions (job_name, scheduled_at, status, attempt, origin)"
            " VALUES (%s, %s, 'failed', 2, 'scheduled')",
            (f"rt-{sid}", slot),
        )
    runs = cli(database_url, "runs", str(sid), "--json")
    (run,) = [json.loads(line) for line in runs.stdout.splitlines()]
    assert (run["status"], run["attempt"], run["origin"]) == ("failed", 2, "scheduled")
    told = cli(database_url, "explain", str(sid), slot.replace("+00:00", "Z"))
    assert told.returncode == 1  # it did not run: the catalog's `explain` exits 1 too
    assert told.stdout.strip().endswith(": failed (scheduled, attempt 2)")
    empty = cli(database_url, "resume", str(sid), "--note", " ")
    assert empty.returncode == 2
    assert one_error_line(empty).startswith("error: note: say why the schedule is resumed")
    resumed = cli(database_url, "resume", str(sid), "--note", "card renewed", "--by", "support")
    assert resumed.returncode == 0 and resumed.stdout.startswith(f"resumed rt-{sid} ")
    with psycopg.connect(database_url) as conn:  # the note kept as a pause's is: in `after`
        logged = conn.execute(
            "SELECT action, by, after->>'note', after->>'paused' FROM runtime_schedule_changes"
            " WHERE schedule_id = %s ORDER BY id DESC LIMIT 2",
            (sid,),
        ).fetchall()
    assert logged == [
        ("resume", "support", "card renewed", "false"),
        ("pause", "support", "card expired", "true"),
    ]
    down = cli("postgresql://nobody@127.0.0.1:1/none", "list")
    assert down.returncode == 1
    assert one_error_line(down).startswith("error: PostgreSQL is unavailable: ")


def test_explain_exits_as_explain_does_a_dry_run_names_what_would_run_next_says_paused(
    database_url,
):
    """`tenants explain` exits as the catalog's `explain`: 0 the slot ran, 1 it did not (why
    printed), 2 cannot tell. A dry-run backfill names the slots it would record as such.
    `next` and `explain` of a paused schedule say who paused it and why."""
    created = cli(
        database_url,
        *("create", "--tenant", "acme", "--name", "daily", "--kind", "test-noop"),
        *("--cron", "0 3 * * *", "--timezone", "UTC"),
    )
    assert created.returncode == 0, created.stderr
    sid = created.stdout.split()[1]
    days = ("2026-01-01T03:00:00Z", "2026-01-02T03:00:00Z", "2026-01-03T03:00:00Z")
    window = ("--start", "2026-01-01T00:00Z", "--end", "2026-01-04T00:00Z")
    plan = cli(database_url, "backfill", sid, *window, "--dry-run")
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.splitlines() == [
        *(f"would record {day[:10]} 03:00 UTC ({day})" for day in days),
        "3 would be recorded, 0 already recorded; nothing recorded (--dry-run)",
    ]
    assert cli(database_url, "backfill", sid, *window).returncode == 0
    again = cli(database_url, "backfill", sid, *window, "--dry-run")
    assert again.stdout.splitlines() == [
        *(f"already recorded: {day[:10]} 03:00 UTC ({day})" for day in days),
        "0 would be recorded, 3 already recorded; nothing recorded (--dry-run)",
    ]

    with psycopg.connect(database_url) as conn:
        conn.execute(
            "INSERT INTO job_executions (job_name, scheduled_at, status, attempt, origin)"
            " VALUES (%s, %s, 'completed', 1, 'backfill')",
            (sid, days[1]),
        )
        # Its timing in force since before the new year, so 5 January was due and missed.
        conn.execute(
            "UPDATE runtime_schedules SET timing_since = '2025-12-31T00:00Z' WHERE id = %s",
            (int(sid.removeprefix("rt-")),),
        )
    ran = cli(database_url, "explain", sid, days[1])
    assert (ran.returncode, ran.stdout.split(": ", 1)[1]) == (
        0,
        "completed (backfill, attempt 1)\n",
    )
    decided = cli(database_url, "explain", sid, days[0])
    assert decided.returncode == 1 and "backfill start decided at" in decided.stdout
    off = cli(database_url, "explain", sid, "2026-01-01T03:01Z")
    assert off.returncode == 1 and "not a fire time of this schedule" in off.stdout
    told = cli(database_url, "explain", sid, days[1], "--json")
    assert told.returncode == 0 and json.loads(told.stdout)["ran"] is True

    paused = cli(database_url, "pause", sid, "--note", "card expired", "--by", "support")
    assert paused.returncode == 0, paused.stderr
    missed = cli(database_url, "explain", sid, "2026-01-05T03:00Z")
    assert missed.returncode == 1
    assert missed.stdout.strip().endswith(": paused by support (card expired): not run")
    upcoming = cli(database_url, "next", sid, "-n", "2")
    first, *times = upcoming.stdout.splitlines()
    assert first.startswith("paused by support (card expired): none of these runs until")
    assert len(times) == 2
    as_json = cli(database_url, "next", sid, "-n", "2", "--json")
    lines = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [line["paused"] for line in lines] == [{"by": "support", "note": "card expired"}] * 2

    down = cli("postgresql://nobody@127.0.0.1:1/none", "explain", sid, days[1])
    assert down.returncode == 2
    assert one_error_line(down).startswith("error: cannot tell: PostgreSQL is unavailable: ")


def test_import_export_round_trip_and_reimport_is_a_no_op(database_url, tmp_path: Path):
    path = tmp_path / "schedules.jsonl"
    path.write_text("\n".join(lines_of(50)) + "\n")
    done = cli(database_url, "import", str(path))
    assert (done.returncode, done.stderr) == (0, "")  # piped: no progress bar
    assert done.stdout.strip() == "imported 50 line(s): 50 created, 0 already there"
    assert rows(database_url, "runtime_schedule_changes") == 50
    again = cli(database_url, "import", str(path))
    assert again.stdout.strip() == "imported 50 line(s): 0 created, 50 already there"

    exported = cli(database_url, "export")
    assert exported.returncode == 0
    out = [json.loads(line) for line in exported.stdout.splitlines()]
    assert len(out) == 50 and sum(o["paused"] for o in out) == 10
    given = {(d["tenant"], d["name"]): d for d in map(json.loads, lines_of(50))}
    for line in out:
        original = given[(line["tenant"], line["name"])]
        assert line["params"] == original["params"] | {"size": 1}
        assert {k: line[k] for k in ("cron", "timezone", "catchup", "paused")} == {
            k: original[k] for k in ("cron", "timezone", "catchup", "paused")
        }
    # What export writes, import reads back: into an empty database, the same set.
    back = tmp_path / "exported.jsonl"
    back.write_text(exported.stdout)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("CREATE DATABASE copy_of TEMPLATE jobs_template")
    copy_url = database_url.rsplit("/", 1)[0] + "/copy_of"
    assert cli(copy_url, "import", str(back)).returncode == 0
    assert cli(copy_url, "export").stdout.splitlines() == exported.stdout.splitlines()

    # A reader that goes away (`export | head -1`) ends the export quietly, at once: its
    # transaction is closed before the process ends (it used to hang, with a traceback).
    read, write = os.pipe()
    os.close(read)  # gone before the first line: the first write fails
    try:
        environ = {k: v for k, v in os.environ.items() if not k.startswith("DATABASE_")}
        gone = subprocess.run(
            [sys.executable, "-m", "schedules", "tenants", "export"],
            cwd=ROOT,
            env=environ | {"DATABASE_URL": database_url},
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write)
    assert (gone.returncode, gone.stderr) == (1, ""), gone.stderr


def test_import_validates_every_line_first_and_names_them(database_url, tmp_path: Path):
    good = lines_of(6)
    broken = [
        good[0],
        "{not json",
        json.dumps(json.loads(good[2]) | {"cron": "0 0 31 2 *"}),
        good[3],
        "[1, 2]",
        json.dumps(json.loads(good[5]) | {"timezone": "Moon/Base"}),
        good[3],  # the same schedule twice
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(broken) + "\n")
    result = cli(database_url, "import", str(path))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines[0] == "error: 5 of 7 line(s) refused; nothing was written:"
    assert [line.split(":")[0].strip() for line in lines[1:]] == [
        "line 2",
        "line 3",
        "line 5",
        "line 6",
        "line 7",
    ]
    assert "day-of-month '31' never fires" in lines[2]
    assert "timezone: is not a known IANA time zone: 'Moon/Base'" in lines[4]
    assert "name: already on line 4" in lines[5]
    assert rows(database_url, "runtime_schedules") == 0


class Told:
    """A progress (`schedules.progress`) that keeps what it was told."""

    def __init__(self) -> None:
        self.phases: list[tuple[str, int, str]] = []
        self.advanced = 0
        self.closed = 0

    def phase(self, name: str, total: int, unit: str = "job") -> None:
        self.phases.append((name, total, unit))

    def advance(self, items: int = 1) -> None:
        self.advanced += items

    def close(self) -> None:
        self.closed += 1

    def write(self, line: str) -> None:
        print(line)


async def test_import_refuses_conflicts_and_quotas_and_writes_nothing(database_url):
    told = Told()  # what a terminal's bar is told: each line checked, then each copied
    await tenants.import_lines(database_url, lines_of(9), quotas=Quotas(), progress=told)
    assert told.phases == [("check", 9, "line"), ("copy", 9, "line")]
    assert (told.advanced, told.closed) == (18, 1)
    changed = [json.dumps(json.loads(lines_of(9)[4]) | {"cron": "1 1 * * *"}), *lines_of(12)[9:]]
    refused = Told()
    with pytest.raises(ConflictError, match=r"line 1: schedule 't1'/'report-4' exists \(id"):
        await tenants.import_lines(database_url, changed, quotas=Quotas(), progress=refused)
    assert refused.closed == 1  # the bar is gone before the refusal is printed
    with pytest.raises(QuotaError, match=r"tenant 't0': 3 schedule.s. stored and 2 more would"):
        await tenants.import_lines(database_url, lines_of(15), quotas=Quotas(max_schedules=4))
    with pytest.raises(QuotaError, match="line 1: tenant 't0': schedule 'report-0' fires every"):
        await tenants.import_lines(
            database_url,
            [json.dumps(json.loads(lines_of(1)[0]) | {"cron": "* * * * *"})],
            quotas=Quotas(min_period=Quotas().min_period * 5),
        )
    with pytest.raises(InvalidScheduleError, match="line 1: schedule 'x'/None: name: is required"):
        await tenants.import_lines(database_url, ['{"tenant": "x"}'], quotas=Quotas())
    assert rows(database_url, "runtime_schedules") == 9
    assert rows(database_url, "runtime_schedule_changes") == 9
