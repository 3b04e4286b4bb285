"""`schedules check` and slot dependencies: a run waiting for its upstream slots within its
deadline pages nobody (not late, not slow); past it, `dependency_overdue` says so, with
what the run waits for; a wait is not counted in a run's duration."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from schedules.health.check import evaluate_job
from schedules.health.status import Kind
from tests.unit.test_check import NOW, REGISTERED, history, kinds, make_job, run

NIGHT = NOW.replace(hour=7, minute=0)  # 02:00 New York (EST)
SHOWS = "waiting for hourly-sync 2027-11-10 05:00\u201307:00 UTC, 21 of 24 done"


def nightly():
    return make_job(id="nightly", cron="0 2 * * *", timezone="America/New_York")


def waiting(deadline):
    return run(
        NIGHT,
        status="running",
        job_name="nightly",
        wait_status="waiting",
        wait_deadline=deadline,
        wait_progress=SHOWS,
    )


def test_a_run_waiting_within_its_deadline_raises_no_alert():
    job = nightly()
    rows = [*history(job, until=NIGHT), waiting(NIGHT + timedelta(hours=6))]
    status = evaluate_job(job, rows, REGISTERED, NOW)  # 5 hours after the night's fire time
    assert status.alerts == []


def test_a_run_waiting_past_its_deadline_is_a_dependency_overdue_alert():
    job = nightly()
    rows = [*history(job, until=NIGHT), waiting(NIGHT + timedelta(hours=2))]
    status = evaluate_job(job, rows, REGISTERED, NOW)
    assert kinds(status) == {Kind.DEPENDENCY_OVERDUE}  # not also not_completed
    (alert,) = status.alerts
    assert alert.message == (
        "the run for 2027-11-10 07:00:00Z still waits for its upstream slots, 3h00m past its "
        f"deadline: {SHOWS}"
    )


def test_a_long_wait_before_a_short_run_is_not_a_slow_run():
    job = nightly()
    rows = history(job, until=NIGHT)
    waited = run(NIGHT, took=timedelta(hours=2, seconds=30), job_name="nightly")
    rows.append(replace(waited, waited=timedelta(hours=2), wait_status="ready"))
    assert evaluate_job(job, rows, REGISTERED, NOW).alerts == []
    rows[-1] = waited  # the same two hours without a wait would be slow
    assert kinds(evaluate_job(job, rows, REGISTERED, NOW)) == {Kind.SLOW_RUN}
