"""Catalog validation and compilation, without servers."""

from __future__ import annotations

import tomllib
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.client import ScheduleOverlapPolicy

from core.errors import CatalogError
from schedules.catalog.compile import (
    CATALOG_MEMO_KEY,
    OPTIONAL_ENTRY_FIELDS,
    compile_schedule,
    job_run,
)
from schedules.catalog.durations import format_duration, parse_duration
from schedules.catalog.model import default_catalog, load_catalog, parse_catalog
from workflows import JobRun

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


def test_a_run_input_carries_the_timing_once_and_no_catalog_entry():
    job = load_catalog()[0]
    sent = job_run(job).model_dump(mode="json")
    assert "definition" not in sent and not {"cron", "interval_seconds", "jitter_seconds"} & set(
        sent
    )
    assert JobRun.model_validate(sent).timing == job.timing
    memo = compile_schedule(job, "q").action.memo
    assert memo == {
        CATALOG_MEMO_KEY: job.model_dump(mode="json", exclude=set(OPTIONAL_ENTRY_FIELDS))
    }


def test_run_inputs_of_earlier_releases_still_decode():
    job = load_catalog()[0]
    timing = job.timing.model_dump(mode="json")
    flat = {"cron": job.cron, "interval_seconds": None, "timezone": job.timezone}
    v4 = job_run(job).model_dump(mode="json") | flat | {"timing": timing, "definition": {}}
    assert JobRun.model_validate(v4).timing == job.timing  # the old fields are ignored


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        (
            {"retry": {"initial_interval": "10m", "maximum_interval": "1m"}},
            "job 'j': retry: maximum_interval: 0:01:00 is shorter than initial_interval 0:10:00",
        ),
        (
            {"params": {"chunk_sise": 100}},
            "job 'j': params.chunk_sise: not a parameter of kind 'invoice-reminders' "
            "(it takes chunk_size, pause_between_chunks_ms, remind_every_days)",
        ),
        ({"heartbeat": "0s"}, "job 'j': heartbeat: must be longer than 0s (got '0s')"),
        ({"starting_deadline": "0s"}, "job 'j': starting_deadline: must be longer than 0s"),
        ({"timeout": True}, "job 'j': timeout: must be a duration in quotes like '90s'"),
        ({"jitter": True}, "job 'j': jitter: must be a duration in quotes like '90s'"),
        ({"timeout": 3600}, "job 'j': timeout: must be a duration in quotes like '90s'"),
        ({"id": "other"}, "job 'j': id: is not a setting; the table's name [j] is the job's id"),
        ({"catchup_window": "100000000d"}, "job 'j': catchup_window: is longer than 3650d"),
        ({"catchup_window": "P99999999D"}, "job 'j': catchup_window: is longer than 3650d"),
        ({"start_at": "0001-01-01T00:00:00Z"}, "job 'j': start_at: must lie in the years 1970"),
        ({"retry": {"initial_interval": "0s"}}, "job 'j': retry.initial_interval: must be longer"),
        ({"retry": {"maximum_attempts": 2**40}}, "job 'j': retry.maximum_attempts: Input should"),
        (
            {"retry": {"maximum_attempts": 0}},
            "job 'j': retry.maximum_attempts: must be at least 1, got 0 (0, unlimited, is not "
            "taken: every run has a bounded lifetime",
        ),
        ({"max_run_time": "0s"}, "job 'j': max_run_time: must be longer than 0s"),
        ({"max_missed": 5000, "catchup": "all"}, "job 'j': max_missed: must be at most 1000"),
        ({"timezone": "x" * 5000}, "job 'j': timezone: is not a known IANA time zone"),
    ],
)
def test_bad_input_is_one_problem_naming_the_job_field_and_value(override, expected):
    job = {k: v for k, v in (GOOD | override).items() if v is not None}
    text = problems(j=job)
    assert expected in text
    assert text.count("\n") == 0 and text.endswith("; nothing was changed")


def test_a_value_with_a_semicolon_is_not_split_into_bogus_problems():
    text = problems(j=GOOD | {"params": {"chunk_size": "many; really"}, "catchup": "all"})
    assert "2 problem(s)" in text
    assert "params.chunk_size: Input should be a valid integer" in text
    assert "got 'many; really'" in text
    assert "job 'j': really" not in text


def test_timeout_and_heartbeat_of_0s_are_two_problems_not_a_traceback():
    text = problems(j=GOOD | {"timeout": "0s", "heartbeat": "0s"})
    assert "job 'j': timeout: must be longer than 0s" in text
    assert "job 'j': heartbeat: must be longer than 0s" in text


def test_a_catalog_that_is_not_utf8_is_one_line(tmp_path: Path):
    path = tmp_path / "jobs.toml"
    path.write_bytes(b'[a-job]\nkind = "invoice-reminders"\ndescription = "caf\xe9"\n')
    with pytest.raises(CatalogError) as err:
        load_catalog(path)
    assert str(err.value) == (
        f"{path} is not UTF-8 text: byte 0xe9 on line 3 cannot be read; save the catalog as UTF-8"
    )


def test_an_id_longer_than_the_engine_s_longest_id_leaves_is_refused():
    # The steps child `<id>-<time>Z/steps` of a workflow job must fit limit.maxIDLength.
    text = problems(**{"x" * 974: GOOD})
    assert "id: is 974 characters; a job id may have at most 973" in text
    assert "'<id>-2009-11-10T23:00:00Z/steps'" in text
    parse_catalog({"x" * 973: GOOD})


def test_a_schedule_too_large_for_temporal_is_refused_at_compile_naming_its_field():
    from datetime import UTC, datetime

    from schedules.sync.plan import compile_jobs

    jobs = parse_catalog({"big": GOOD | {"description": "d" * 600_000}, "fine": GOOD})
    with pytest.raises(CatalogError) as err:
        compile_jobs(jobs, "q", datetime.now(UTC))
    # The description, in the catalog entry (the action's memo), and its head in the
    # schedule's note (capped at 1 kB).
    assert str(err.value).startswith("job 'big': its schedule is 602,")
    assert "largest: description 600,002 bytes" in str(err.value)
    compile_jobs(jobs[1:], "q", datetime.now(UTC))


def test_the_ui_summary_and_details_are_cut_to_temporals_metadata_limits():
    (job,) = parse_catalog({"wordy": GOOD | {"description": "é" * 1000, "owner": "o" * 30_000}})
    action = compile_schedule(job, "q").action
    assert len(action.static_summary.encode()) <= 400 and action.static_summary.endswith("…")
    assert len(action.static_details.encode()) <= 20_000
    memo = action.memo[CATALOG_MEMO_KEY]
    assert memo["description"] == "é" * 1000  # the catalog entry keeps it all


def test_a_run_lives_longer_than_its_fields_let_its_work_take():
    """The bound (the schedule's execution timeout) covers every attempt of every series at
    the timeout, the waits between them, catch-up slots and a dependency's wait; an owner's
    `max_run_time` replaces it."""
    retry = {"maximum_attempts": 3, "maximum_interval": "5m"}
    (job,) = parse_catalog({"j": GOOD | {"timeout": "2h", "retry": retry}})
    work = 10 * (3 * timedelta(hours=2) + 2 * timedelta(minutes=5))  # 10 attempt series
    assert job.lifetime == work + 4 * timedelta(hours=1)  # + begin, notes, claim, failure
    (three,) = parse_catalog({"j": GOOD | {"catchup": "all", "max_missed": 2}})
    (one,) = parse_catalog({"j": GOOD})
    assert three.lifetime - timedelta(hours=2) == 3 * (one.lifetime - timedelta(hours=2))
    (given,) = parse_catalog({"j": GOOD | {"max_run_time": "3d"}})
    assert given.lifetime == timedelta(days=3)
    action = compile_schedule(given, "q").action
    assert action.execution_timeout == timedelta(days=3)


def test_a_wait_that_keeps_waiting_is_bounded_a_week_past_its_deadline():
    catalog = {
        "up": GOOD,
        "down": GOOD | {"depends_on": [{"job": "up", "slots": "same", "within": "2h"}]},
        "skips": GOOD
        | {"depends_on": [{"job": "up", "slots": "same", "within": "2h", "on_failure": "skip"}]},
    }
    jobs = {job.id: job for job in parse_catalog(catalog)}
    assert jobs["down"].lifetime - jobs["up"].lifetime == timedelta(hours=2, days=7)
    assert jobs["skips"].lifetime - jobs["up"].lifetime == timedelta(hours=2)
