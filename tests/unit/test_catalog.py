"""Catalog validation and compilation, without servers."""

from __future__ import annotations

import tomllib
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.client import ScheduleOverlapPolicy

from core.errors import CatalogError
from schedules.catalog import default_catalog, load_catalog, parse_catalog
from schedules.compile import compile_schedule, job_run
from schedules.durations import format_duration, parse_duration

GOOD = {
    "kind": "invoice-reminders",
    "cron": "30 2 * * *",
    "timezone": "Europe/London",
}


def problems(**jobs) -> str:
    with pytest.raises(CatalogError) as err:
        parse_catalog(jobs)
    return str(err.value)


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        (
            {"cron": "61 2 * * *"},
            "job 'j': cron: minute '61' is out of range: 61 is not 0-59 (got '61 2 * * *')",
        ),
        (
            {"timezone": "Europe/Londn"},
            "job 'j': timezone: is not a known IANA time zone: 'Europe/Londn'",
        ),
        ({"catchup": "all"}, "job 'j': max_missed: catchup 'all' needs max_missed >= 1, got None"),
        (
            {"catchup": "all", "max_missed": 0},
            "max_missed: catchup 'all' needs max_missed >= 1, got 0",
        ),
        (
            {"kind": "payroll"},
            "job 'j': kind: unknown job kind 'payroll'; known kinds: ",
        ),
        (
            {"start_at": "2027-02-01T00:00:00Z", "end_at": "2027-01-01T00:00:00Z"},
            "job 'j': start_at: 2027-02-01 00:00:00+00:00 is not before end_at 2027-01-01 00:00:00+00:00",
        ),
        ({"cron": None, "interval": "500ms"}, "job 'j': interval: must be at least 1s"),
        (
            {"jitter": "1d"},
            "job 'j': jitter: 1 day, 0:00:00 is not shorter than the period 1 day, 0:00:00",
        ),
        (
            {"params": {"chunk_size": 0}},
            "job 'j': params.chunk_size: Input should be greater than or equal to 1 (got 0)",
        ),
        ({"catchup_window": "2s"}, "job 'j': catchup_window: must be at least 10s"),
        ({"interval": "1m"}, "job 'j': cron / interval: give exactly one of them"),
        ({"timeout": "soon"}, "job 'j': timeout: is not a duration like '90s'"),
        ({"colour": "blue"}, "job 'j': colour: Extra inputs are not permitted"),
    ],
)
def test_each_problem_names_the_job_the_field_and_the_value(override, expected):
    job = {k: v for k, v in (GOOD | override).items() if v is not None}
    assert expected in problems(j=job)


def test_every_problem_is_listed_at_once():
    text = problems(
        **{
            "bad-cron": GOOD | {"cron": "* * *"},
            "Bad_Id": GOOD,
            "no-zone": {"kind": "invoice-reminders", "cron": "0 * * * *"},
            "fine": GOOD,
        }
    )
    assert "3 problem(s); nothing was changed" in text
    assert "job 'bad-cron': cron" in text
    assert "job 'Bad_Id': id: must be kebab-case" in text
    assert "job 'no-zone': timezone: is required" in text


def test_a_duplicate_job_id_is_refused_with_its_line(tmp_path: Path):
    path = tmp_path / "jobs.toml"
    path.write_text(
        '[a-job]\nkind = "invoice-reminders"\ncron = "0 1 * * *"\ntimezone = "UTC"\n\n'
        '[a-job]\nkind = "invoice-reminders"\ncron = "0 2 * * *"\ntimezone = "UTC"\n'
    )
    with pytest.raises(CatalogError, match=r"not valid TOML: .*line 6"):
        load_catalog(path)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("15m", 900), ("1h30m", 5400), ("1d", 86400), ("PT5M", "PT5M")],
)
def test_durations(text, seconds):
    parsed = parse_duration(text)
    assert parsed == (seconds if isinstance(seconds, str) else timedelta(seconds=seconds))


def test_format_duration_round_trips():
    assert format_duration(timedelta(seconds=5400)) == "1h30m"
    assert parse_duration(format_duration(timedelta(days=1, minutes=5))) == timedelta(
        days=1, minutes=5
    )


def test_the_packaged_catalog_is_valid_and_invoice_reminders_compiles():
    text = (Path(__file__).parents[2] / "schedules" / "jobs.toml").read_text()
    assert "invoice-reminders" in tomllib.loads(text)
    job = default_catalog()["invoice-reminders"]
    assert (job.cron, job.timezone, job.catchup, job.overlap) == (
        "30 2 * * *",
        "Europe/London",
        "latest",
        "skip",
    )
    schedule = compile_schedule(job, "q")
    assert schedule.policy.overlap == ScheduleOverlapPolicy.SKIP
    assert schedule.policy.catchup_window == job.catchup_window
    assert schedule.action.id == "invoice-reminders"
    assert schedule.action.task_queue == "q"
    run = job_run(job)
    assert run.activity == "send_invoice_reminders"
    assert run.params == {"chunk_size": 5000, "remind_every_days": 7}
    assert run.heartbeat_seconds == 60
