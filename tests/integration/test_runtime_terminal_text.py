"""Control characters never reach an operator's terminal (issue 36, item 6).

A note or a `--by` holding an escape sequence (`\\e]0;owned\\a` retitles the window,
`\\e[2J` clears the screen) is refused on every write, the CLI's and the Python API's,
in one line naming the field, nothing written; and what `list` and `show` print of rows
stored before the check escapes what is not printable.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime

import psycopg
import pytest

from core.errors import InvalidScheduleError
from schedules import tenants
from tests.helpers import ROOT
from tests.integration.test_runtime_schedules_cli import cli, one_error_line, rows

TITLE_AND_CLEAR = "\x1b]0;owned\x07\x1b[2J"
RED = "evil\x1b[31m"
RAW = ("\x1b", "\x07")  # what must never be printed
NOW = datetime(2027, 3, 1, 12, tzinfo=UTC)


def created(database_url: str) -> int:
    made = cli(
        database_url,
        *("create", "--tenant", "acme", "--name", "weekly", "--kind", "test-noop"),
        *("--cron", "0 8 * * 1", "--timezone", "UTC"),
    )
    assert made.returncode == 0, made.stderr
    return int(made.stdout.split()[1].removeprefix("rt-"))


def state(database_url: str, sid: int) -> tuple:
    with psycopg.connect(database_url) as conn:
        return conn.execute(
            "SELECT version, paused, paused_note, updated_by FROM runtime_schedules WHERE id = %s",
            (sid,),
        ).fetchone()


def test_the_cli_refuses_a_note_or_by_with_control_characters(database_url):
    sid = created(database_url)
    before = state(database_url, sid)
    for args, field in (
        (("pause", str(sid), "--note", TITLE_AND_CLEAR), "error: note"),
        (("pause", str(sid), "--note", "migrating", "--by", RED), "argument --by"),
        (("resume", str(sid), "--by", RED), "argument --by"),
        (("resume", str(sid), "--note", TITLE_AND_CLEAR), "error: note"),
        (("delete", str(sid), "--by", RED), "argument --by"),
        (("update", str(sid), "--version", "1", "--cron", "0 9 * * 1", "--by", RED), "--by"),
        (("trigger", str(sid), "--by", RED), "argument --by"),  # before Temporal is asked
        (
            ("backfill", str(sid), "--start", "2027-01-01", "--end", "2027-01-02", "--by", RED),
            "--by",
        ),
    ):
        done = cli(database_url, *args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        line = one_error_line(done)
        assert f"{field}: must hold no control characters, got " in line, line
        assert not any(ch in line for ch in RAW), line
    assert state(database_url, sid) == before
    refused = cli(
        database_url,
        *("create", "--tenant", "acme", "--name", "other", "--kind", "test-noop"),
        *("--cron", "0 8 * * 1", "--timezone", "UTC", "--paused", "--note", TITLE_AND_CLEAR),
    )
    assert refused.returncode == 2
    assert "note: must hold no control characters" in one_error_line(refused)
    assert rows(database_url, "runtime_schedules") == 1
    assert rows(database_url, "runtime_schedule_changes") == 1


def test_an_import_line_with_a_control_character_in_its_note_is_named(database_url, tmp_path):
    line = {"tenant": "acme", "name": "w", "kind": "test-noop", "cron": "0 8 * * 1"}
    good = json.dumps(line | {"timezone": "UTC"})
    bad = json.dumps(line | {"name": "x", "timezone": "UTC", "paused": True, "note": RED})
    path = tmp_path / "lines.jsonl"
    path.write_text(f"{good}\n{bad}\n")
    done = cli(database_url, "import", str(path))
    assert done.returncode == 2
    line = one_error_line(done)
    assert line.startswith("error: line 2: schedule 'acme'/'x': note: must hold no control"), line
    by = cli(database_url, "import", str(path), "--by", RED)
    assert by.returncode == 2 and "argument --by: must hold no control" in one_error_line(by)
    assert rows(database_url, "runtime_schedules") == 0


async def test_the_python_api_refuses_them_naming_the_field(database_url):
    schedule = {"tenant": "acme", "name": "w", "kind": "test-noop", "cron": "0 8 * * 1"}
    schedule |= {"timezone": "UTC"}
    with pytest.raises(InvalidScheduleError, match=r"^by: must hold no control"):
        await tenants.create(database_url, schedule, by=RED, clock=lambda: NOW)
    with pytest.raises(InvalidScheduleError, match=r"note: must hold no control"):
        await tenants.create(database_url, schedule | {"paused": True, "note": TITLE_AND_CLEAR})
    made = await tenants.create(database_url, schedule, clock=lambda: NOW)
    sid = made.schedule.id
    for write in (
        lambda: tenants.pause(database_url, sid, TITLE_AND_CLEAR),
        lambda: tenants.pause(database_url, sid, "fine", by=RED),
        lambda: tenants.update(database_url, sid, 1, {"cron": "0 9 * * 1"}, by=RED),
        lambda: tenants.resume(database_url, sid, by=RED),
        lambda: tenants.delete(database_url, sid, by=RED),
        lambda: tenants.apply(database_url, "acme", [schedule], by=RED),
        lambda: tenants.import_lines(database_url, [json.dumps(schedule)], by=RED),
        lambda: tenants.trigger(database_url, sid, by=RED),
        lambda: tenants.backfill(database_url, sid, NOW, NOW.replace(hour=13), by=RED),
    ):
        with pytest.raises(InvalidScheduleError, match=r"^(by|note): must hold no control"):
            await write()
    assert (await tenants.get(database_url, sid)).version == 1
    assert rows(database_url, "runtime_dispatch_intents") == 0


def test_list_and_show_escape_what_rows_stored_before_the_check_hold(database_url):
    sid = created(database_url)
    with psycopg.connect(database_url) as conn:  # as a row written before the check was
        conn.execute(
            "UPDATE runtime_schedules SET paused = true, paused_note = %s, paused_by = %s,"
            " tenant = %s WHERE id = %s",
            (TITLE_AND_CLEAR, RED, "ac\x1bme", sid),
        )
        conn.execute("UPDATE runtime_schedule_changes SET by = %s", (RED,))
    for args in (("list",), ("show", str(sid)), ("list", "--json"), ("show", str(sid), "--json")):
        done = cli(database_url, *args)
        assert done.returncode == 0, done.stderr
        assert not any(ch in done.stdout for ch in RAW), (args, done.stdout)
    shown = cli(database_url, "show", str(sid)).stdout
    assert "paused by evil\\x1b[31m (\\x1b]0;owned\\x07\\x1b[2J)" in shown
    assert "ac\\x1bme/weekly" in shown and "create by evil\\x1b[31m" in shown


def test_the_catalog_cli_refuses_a_pause_or_resume_note_with_control_characters():
    for command in ("pause", "resume"):  # refused before Temporal is asked
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "schedules",
                command,
                "invoice-reminders",
                "--note",
                TITLE_AND_CLEAR,
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        line = one_error_line(done)
        assert "argument --note: must hold no control characters" in line, line
        assert not any(ch in line for ch in RAW)
