"""The operator commands' pure parts: fire times in ranges, DST notes, times, output."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest

from schedules.catalog.model import JobSpec
from schedules.catalog.times import dst_note, local_text, parse_time
from schedules.cli.format import (
    describe_entry,
    format_describe,
    format_list,
    format_next,
    list_entry,
    next_entry,
)
from schedules.server.state import ServerState
from timing import TICK, TZDATA_VERSION

NOW = datetime(2026, 11, 29, 16, 0, tzinfo=UTC)


def job(cron: str | None = "30 2 * * *", timezone: str = "America/New_York", **fields) -> JobSpec:
    timing = {"cron": cron} if cron else {}
    return JobSpec(id="nightly", kind="invoice-reminders", timezone=timezone, **timing, **fields)


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def notes(spec: JobSpec, after: datetime, count: int) -> list[tuple[str, str | None]]:
    entry = next_entry(spec, after, spec.timing.upcoming(after, count))
    return [(run["utc"], run["note"]) for run in entry["runs"]]


def test_a_fixed_time_in_the_spring_forward_gap_runs_at_the_end_of_the_gap():
    assert notes(job(), utc(2027, 3, 13, 12), 2) == [
        ("2027-03-14T07:00:00Z", "spring forward: 02:30 does not exist, runs at 03:00"),
        ("2027-03-15T06:30:00Z", None),
    ]


def test_a_fixed_time_in_the_repeated_hour_runs_once_at_the_first():
    assert notes(job("30 1 * * *"), utc(2027, 11, 6, 12), 2) == [
        ("2027-11-07T05:30:00Z", "fall back: runs once, at the first 01:30 (EDT)"),
        ("2027-11-08T06:30:00Z", None),
    ]


def test_a_wildcard_hour_job_runs_twice_in_the_repeated_hour_and_skips_the_gap():
    assert notes(job("30 * * * *"), utc(2027, 11, 7, 5), 3) == [
        ("2027-11-07T05:30:00Z", "fall back: 01:30 happens twice; this is the first (EDT)"),
        ("2027-11-07T06:30:00Z", "fall back: 01:30 happens twice; this is the second (EST)"),
        ("2027-11-07T07:30:00Z", None),
    ]
    assert notes(job("*/30 * * * *"), utc(2027, 3, 14, 6, 45), 2) == [
        ("2027-03-14T07:00:00Z", "spring forward: 02:00 and 02:30 do not exist, skipped"),
        ("2027-03-14T07:30:00Z", None),
    ]


def test_no_note_where_dst_moves_nothing():
    # London springs forward from 01:00 to 02:00: 02:30 exists, 01:30 does not.
    assert notes(job(timezone="Europe/London"), utc(2027, 3, 27, 12), 1) == [
        ("2027-03-28T01:30:00Z", None)
    ]
    assert notes(job("30 1 * * *", "Europe/London"), utc(2027, 3, 27, 12), 1) == [
        ("2027-03-28T01:00:00Z", "spring forward: 01:30 does not exist, runs at 02:00")
    ]
    every = job(None, interval=timedelta(hours=1))
    assert dst_note(every, utc(2027, 3, 14, 7), utc(2027, 3, 14, 6)) is None


def test_between_is_start_inclusive_end_exclusive_and_bounded():
    daily = job("0 3 * * *", "UTC")
    times = daily.timing.fire_times(utc(2026, 10, 1, 3), utc(2026, 10, 6, 3), limit=100)
    assert times == [utc(2026, 10, day, 3) for day in range(1, 6)]
    assert daily.timing.fire_times(utc(2026, 10, 1, 3), utc(2026, 10, 6, 3), limit=3) == times[:3]
    minutely = job("* * * * *", "UTC")
    # A year of minutely runs is not listed to learn there are more than 1000.
    assert len(minutely.timing.fire_times(utc(2026, 1, 1), utc(2027, 1, 1), limit=1001)) == 1001


def test_between_and_upcoming_respect_the_jobs_own_bounds():
    bounded = job("0 3 * * *", "UTC", start_at=utc(2026, 10, 3), end_at=utc(2026, 10, 4, 3))
    assert bounded.timing.fire_times(utc(2026, 10, 1), utc(2026, 11, 1), limit=100) == [
        utc(2026, 10, 3, 3),
        utc(2026, 10, 4, 3),
    ]
    assert bounded.timing.upcoming(utc(2026, 10, 1), 5) == [
        utc(2026, 10, 3, 3),
        utc(2026, 10, 4, 3),
    ]


def test_interval_jobs_count_from_the_epoch_in_utc():
    every = job(None, interval=timedelta(minutes=90))
    assert every.timing.upcoming(utc(2026, 1, 1), 2) == [utc(2026, 1, 1, 1, 30), utc(2026, 1, 1, 3)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2027-03-13", utc(2027, 3, 13, 5)),  # midnight EST
        ("2027-07-01T02:30", utc(2027, 7, 1, 6, 30)),  # EDT
        ("2027-03-13T07:00:00Z", utc(2027, 3, 13, 7)),
        ("2027-03-13T09:00:00+02:00", utc(2027, 3, 13, 7)),
        ("now", NOW),
    ],
)
def test_times_without_an_offset_are_in_the_jobs_zone(text, expected):
    assert parse_time(text, "America/New_York", NOW) == expected


def test_an_unreadable_time_names_itself():
    with pytest.raises(ValueError, match="'next tuesday' is not a time like 2026-11-20"):
        parse_time("next tuesday", "UTC", NOW)


def test_list_shows_not_synced_paused_with_note_and_unknown_last_runs():
    synced = ServerState(
        exists=True,
        managed=True,
        paused=True,
        note="ledger migration",
        next_times=[utc(2026, 11, 30, 7, 30)],
    )
    last = {"scheduled_at": utc(2026, 11, 29, 7, 30), "status": "completed", "attempt": 1}
    running = ServerState(exists=True, managed=True, next_times=[utc(2026, 11, 30, 7, 30)])
    entries = [
        list_entry(job(), synced, last),
        list_entry(job().model_copy(update={"id": "later"}), ServerState(exists=False), None),
        list_entry(job().model_copy(update={"id": "running"}), running, last),
    ]
    # A paused job runs nothing: no next run, the pause and its note instead.
    assert entries[0]["next_run"] is None
    assert entries[2]["next_run"] == {
        "utc": "2026-11-30T07:30:00Z",
        "local": "2026-11-30T02:30:00-05:00",
    }
    text = format_list(entries, database_ok=True).splitlines()
    assert text[1].split("  ")[0] == "nightly"
    cells = [re.split(r"  +", line) for line in text]
    assert cells[1][3:7] == ["paused: ledger migration", "-", "2026-11-29 02:30 EST", "completed"]
    assert text[1].endswith("yes: ledger migration")
    assert "not synced" in text[2] and "never ran" in text[2]
    assert cells[3][3:5] == ["2026-11-30 02:30 EST", "2026-11-30T07:30:00Z"]
    unknown = format_list(entries, database_ok=False).splitlines()
    assert "?" in unknown[1] and "never ran" not in unknown[2]


def test_describe_of_a_paused_job_shows_no_next_run_and_the_record_counts():
    state = ServerState(
        exists=True,
        managed=True,
        paused=True,
        note="ledger migration",
        next_times=[utc(2026, 11, 30, 7, 30)],
    )
    record = {
        "completed": 12,
        "failed": 1,
        "skipped": 2,
        "compensated": 0,
        "running": 0,
        "last_success": utc(2026, 11, 29, 7, 30),
        "last_failure": None,
    }
    entry = describe_entry(job(), state, [], None, record)
    assert entry["server"]["next_runs"] == []
    assert entry["record"]["last_success"] == {
        "utc": "2026-11-29T07:30:00Z",
        "local": "2026-11-29T02:30:00-05:00",
    }
    text = format_describe(entry)
    assert "  next runs     none: paused: ledger migration" in text
    assert "2026-11-30" not in text
    assert "  runs          12 completed, 1 failed, 2 skipped\n" in text
    assert "  last success  2026-11-29 02:30 EST  2026-11-29T07:30:00Z" in text
    assert "  last failure  never" in text


def test_describe_reports_drift_and_an_unavailable_database():
    state = ServerState(exists=True, managed=True, definition={"cron": "0 1 * * *"})
    entry = describe_entry(job(), state, None, "PostgreSQL is unavailable: refused")
    assert entry["server"]["matches_catalog"] is False
    text = format_describe(entry)
    assert "drift         the schedule was built from a different catalog entry" in text
    assert "  unavailable: PostgreSQL is unavailable: refused" in text
    assert entry["time_zone_database"] == f"tzdata {TZDATA_VERSION}"
    # The catalog's keys are aligned to the longest (`pause_after_failures`).
    assert f"(time zones)          tzdata {TZDATA_VERSION}" in text


def test_next_text_shows_local_utc_and_the_dst_column_only_when_needed():
    spring = format_next(
        next_entry(job(), utc(2027, 3, 13, 12), job().timing.upcoming(utc(2027, 3, 13, 12), 1))
    )
    assert "2027-03-14 03:00 EDT  2027-03-14T07:00:00Z  spring forward" in spring
    # Listed from the change itself (`next --from 2027-03-14T03:00`): the note still shows.
    at_change = utc(2027, 3, 14, 7)
    from_change = format_next(
        next_entry(job(), at_change, job().timing.upcoming(at_change - TICK, 1))
    )
    assert "2027-03-14 03:00 EDT  2027-03-14T07:00:00Z  spring forward" in from_change
    plain = format_next(next_entry(job(), NOW, job().timing.upcoming(NOW, 1)))
    assert "DST" not in plain and "2026-11-30 02:30 EST  2026-11-30T07:30:00Z" in plain
    assert local_text(utc(2026, 11, 30, 7, 30, 5), "UTC") == "2026-11-30 07:30:05 UTC"


def test_next_of_a_job_the_catalog_pauses_says_so_above_its_times():
    paused = job(paused=True, note="ledger migration")
    after = utc(2027, 3, 13, 12)
    entry = next_entry(paused, after, paused.timing.upcoming(after, 1))
    assert (entry["paused"], entry["note"]) == (True, "ledger migration")
    lines = format_next(entry).splitlines()
    assert lines[1] == (
        "  paused by the catalog's `paused = true` (ledger migration): it runs none of these "
        "until resumed; they are the times it fires once resumed"
    )
    assert "2027-03-14T07:00:00Z" in lines[-1]
    assert "paused" not in format_next(next_entry(job(), after, job().timing.upcoming(after, 1)))
    # An operator's pause, as the server and the pause record tell it.
    by_hand = next_entry(
        job(), after, job().timing.upcoming(after, 1), paused_by="alice", note="incident 7"
    )
    assert (by_hand["paused"], by_hand["paused_by"]) == (True, "alice")
    assert format_next(by_hand).splitlines()[1].startswith("  paused by alice (incident 7): ")


def test_list_and_describe_escape_a_note_another_tool_set_on_the_schedule():
    # The Temporal UI, or `temporal schedule toggle --reason`, takes any note: what the
    # catalog's commands print of it cannot retitle or clear the operator's terminal.
    state = ServerState(exists=True, managed=True, paused=True, note="\x1b]0;owned\x07\x1b[2J")
    listed = format_list([list_entry(job(), state, None)], database_ok=True)
    described = format_describe(describe_entry(job(), state, [], None, None))
    for text in (listed, described):
        assert "\x1b" not in text and "\x07" not in text
        assert "paused: \\x1b]0;owned\\x07\\x1b[2J" in text


def test_describe_shows_a_dependency_as_the_catalog_says_it_and_as_json():
    spec = job(depends_on=[{"job": "hourly-sync", "slots": "window", "within": "2h"}])
    entry = describe_entry(spec, ServerState(exists=False), None, None)
    assert entry["job"]["depends_on"] == [
        {"job": "hourly-sync", "slots": "window", "within": "2h", "on_failure": "wait"}
    ]
    assert json.loads(json.dumps(entry))["job"]["depends_on"][0]["within"] == "2h"
