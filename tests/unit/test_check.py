"""`schedules check` evaluation: every alert from a constructed history, at a given `now`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from schedules.catalog.model import load_catalog
from schedules.cli.check import format_report, to_json
from schedules.health.check import evaluate, evaluate_job
from schedules.health.status import Execution, Kind, OutboxState, ScheduleState

NOW = datetime(2027, 11, 10, 12, 0, tzinfo=UTC)
SINCE = NOW - timedelta(days=30)
REGISTERED = ScheduleState(exists=True, created_at=SINCE, timing_since=SINCE)


def make_job(**overrides):
    """The catalog's first job with `overrides`: hourly in UTC unless told otherwise."""
    base = load_catalog()[0]
    fields = {"id": "hourly-job", "cron": "0 * * * *", "timezone": "UTC"} | overrides
    return base.model_copy(update=fields)


def run(fire: datetime, took=timedelta(seconds=30), status="completed", **fields) -> Execution:
    started = fields.pop("started_at", fire + timedelta(seconds=2))
    finished = None if status == "running" else started + took
    return Execution(
        job_name=fields.pop("job_name", "hourly-job"),
        scheduled_at=fire,
        status=status,
        started_at=started,
        finished_at=fields.pop("finished_at", finished),
        attempt=fields.pop("attempt", 1),
        **fields,
    )


def history(job, now=NOW, since=SINCE, until=None) -> list[Execution]:
    """A completed run for every fire time of `job` in [since, until or now - 1 min)."""
    end = until or now - timedelta(minutes=1)
    fires = job.timing.fire_times(since, end)
    return [run(f, job_name=job.id) for f in fires]


def kinds(status) -> set[str]:
    return {a.kind for a in status.alerts}


def test_a_healthy_history_raises_no_alert():
    job = make_job()
    state = ScheduleState(
        exists=True, timing_since=SINCE, next_action_times=(NOW + timedelta(hours=1),)
    )
    status = evaluate_job(job, history(job), state, NOW)
    assert status.alerts == []
    assert status.state == "active"
    assert status.last_run.scheduled_at == NOW - timedelta(hours=1)
    assert status.last_success == status.last_run
    assert (status.next_due, status.next_due_source) == (NOW + timedelta(hours=1), "temporal")


def test_not_completed_when_the_latest_due_fire_time_has_no_run():
    job = make_job()
    rows = history(job, until=NOW - timedelta(minutes=59))  # 11:00 never ran
    status = evaluate_job(job, rows, REGISTERED, NOW + timedelta(minutes=16))
    assert Kind.NOT_COMPLETED in kinds(status)
    message = next(a.message for a in status.alerts if a.kind == Kind.NOT_COMPLETED)
    assert "2027-11-10 12:00:00Z" in message and "no run was recorded" in message


def test_not_completed_waits_for_the_grace_and_the_usual_run_time():
    job = make_job()
    rows = history(job, until=NOW - timedelta(minutes=59))
    # 12:00 fired 14 minutes ago: within 15 minutes of grace plus a 30 s median run.
    assert Kind.NOT_COMPLETED not in kinds(
        evaluate_job(job, rows, REGISTERED, NOW + timedelta(minutes=14))
    )
    longer = make_job(alert_grace=timedelta(hours=1))
    assert Kind.NOT_COMPLETED not in kinds(
        evaluate_job(longer, rows, REGISTERED, NOW + timedelta(minutes=30))
    )


def test_not_completed_names_a_run_still_running():
    job = make_job()
    rows = [*history(job, until=NOW - timedelta(minutes=59)), run(NOW, status="running", attempt=3)]
    status = evaluate_job(job, rows, REGISTERED, NOW + timedelta(minutes=20))
    message = next(a.message for a in status.alerts if a.kind == Kind.NOT_COMPLETED)
    assert "still running (attempt 3)" in message
    assert Kind.MISSED_RUNS not in kinds(status)  # a row exists: it was not missed


def test_a_skipped_run_counts_as_done():
    job = make_job()
    rows = [*history(job, until=NOW), run(NOW, status="skipped", error="starting deadline passed")]
    assert evaluate_job(job, rows, REGISTERED, NOW + timedelta(minutes=30)).alerts == []


def test_last_run_failed_fires_and_clears_after_a_success():
    job = make_job()
    rows = history(job)
    rows[-2] = run(rows[-2].scheduled_at, status="failed", error="boom: ledger locked\ntrace")
    rows[-1] = run(
        rows[-1].scheduled_at, status="failed", error="boom: ledger locked\ntrace", attempt=10
    )
    status = evaluate_job(job, rows, REGISTERED, NOW)
    assert kinds(status) == {Kind.LAST_RUN_FAILED, Kind.NOT_COMPLETED}
    message = next(a.message for a in status.alerts if a.kind == Kind.LAST_RUN_FAILED)
    assert "after 10 attempt(s): boom: ledger locked" in message and "trace" not in message

    rows[-2] = run(rows[-2].scheduled_at, status="failed")
    rows[-1] = run(rows[-1].scheduled_at)
    assert evaluate_job(job, rows, REGISTERED, NOW).alerts == []


def test_missed_runs_in_the_lookback():
    job = make_job()
    rows = [r for r in history(job) if r.scheduled_at != NOW - timedelta(hours=5)]
    status = evaluate_job(job, rows, REGISTERED, NOW)
    assert kinds(status) == {Kind.MISSED_RUNS}
    assert "1 of 24 fire times" in status.alerts[0].message
    assert "2027-11-10 07:00:00Z" in status.alerts[0].message
    # Older than the lookback: no longer reported.
    later = NOW + timedelta(hours=20)
    rows += history(job, now=later, since=NOW)
    assert evaluate_job(job, rows, REGISTERED, later).alerts == []


def test_a_run_anywhere_before_the_next_fire_time_covers_it():
    # Jitter, a manual trigger or DST compensation can move the recorded time.
    job = make_job()
    rows = [
        r
        if r.scheduled_at != NOW - timedelta(hours=5)
        else run(r.scheduled_at + timedelta(minutes=7))
        for r in history(job)
    ]
    assert evaluate_job(job, rows, REGISTERED, NOW).alerts == []


def test_no_runs_are_expected_before_the_timing_took_effect():
    job = make_job()
    since = NOW - timedelta(hours=3)
    state = ScheduleState(exists=True, created_at=SINCE, timing_since=since)
    rows = history(job, since=since)
    assert evaluate_job(job, rows, state, NOW).alerts == []
    # Without timing_since: from the older of the first row and the schedule's creation.
    state = ScheduleState(exists=True, created_at=NOW - timedelta(hours=2))
    assert evaluate_job(job, rows, state, NOW).alerts == []
    status = evaluate_job(job, rows, ScheduleState(exists=True, created_at=SINCE), NOW)
    assert kinds(status) == {Kind.MISSED_RUNS}


def test_a_brand_new_job_with_no_rows_expects_runs_only_after_its_schedule_existed():
    job = make_job()
    state = ScheduleState(exists=True, created_at=NOW - timedelta(minutes=10))
    assert evaluate_job(job, [], state, NOW).alerts == []
    assert kinds(evaluate_job(job, [], state, NOW + timedelta(hours=1))) == {
        Kind.NOT_COMPLETED,
        Kind.MISSED_RUNS,
    }


def test_catchup_gap_records_in_the_lookback_alert():
    job = make_job()
    gap = run(
        NOW - timedelta(days=6, minutes=-3),
        status="skipped",
        started_at=NOW - timedelta(hours=2),
        finished_at=NOW - timedelta(hours=2),
        error="catch-up gap: 40 missed fire times dropped, cap max_missed=3",
    )
    status = evaluate_job(job, [*history(job), gap], REGISTERED, NOW)
    assert kinds(status) == {Kind.CATCHUP_GAP}
    assert "40 missed fire times dropped" in status.alerts[0].message
    # Recorded before the lookback: quiet. Other skips are not gaps.
    old = run(
        gap.scheduled_at, status="skipped", started_at=NOW - timedelta(days=2), error=gap.error
    )
    assert evaluate_job(job, [*history(job), old], REGISTERED, NOW).alerts == []
    other = run(
        gap.scheduled_at, status="skipped", started_at=NOW, error="starting deadline passed"
    )
    assert evaluate_job(job, [*history(job), other], REGISTERED, NOW).alerts == []


def test_slow_run_against_the_median_of_the_previous_twenty():
    job = make_job()
    rows = history(job)
    last = rows[-1].scheduled_at
    rows[-1] = run(last, took=timedelta(minutes=2))  # 4 x a 30 s median, 90 s over it
    status = evaluate_job(job, rows, REGISTERED, NOW)
    assert kinds(status) == {Kind.SLOW_RUN}
    assert "took 2m00s, over 1.5 x the median 30s of the 20 before it" in status.alerts[0].message

    rows[-1] = run(last, took=timedelta(seconds=44))  # under 1.5 x
    assert evaluate_job(job, rows, REGISTERED, NOW).alerts == []


def test_slow_run_ignores_small_absolute_differences_and_short_histories():
    job = make_job()
    rows = history(job)
    rows[-1] = run(rows[-1].scheduled_at, took=timedelta(seconds=80))  # 2.7 x but only +50 s
    assert evaluate_job(job, rows, REGISTERED, NOW).alerts == []
    short = history(job, since=NOW - timedelta(hours=4, minutes=30))
    short[-1] = run(short[-1].scheduled_at, took=timedelta(hours=1))
    state = ScheduleState(exists=True, timing_since=NOW - timedelta(hours=4, minutes=30))
    assert evaluate_job(job, short, state, NOW).alerts == []


def test_slow_run_warns_while_a_run_is_still_running():
    job = make_job()
    rows = [*history(job, until=NOW), run(NOW, status="running")]
    assert evaluate_job(job, rows, REGISTERED, NOW + timedelta(minutes=1)).alerts == []
    status = evaluate_job(job, rows, REGISTERED, NOW + timedelta(minutes=3))
    assert kinds(status) == {Kind.SLOW_RUN}
    assert "has been running for 2m58s" in status.alerts[0].message


def test_schedule_missing_or_foreign_is_an_alert():
    job = make_job()
    status = evaluate_job(job, history(job), ScheduleState(exists=False), NOW)
    assert kinds(status) == {Kind.SCHEDULE_NOT_REGISTERED}
    assert (
        status.state == "not registered" and "python -m schedules sync" in status.alerts[0].message
    )
    assert status.next_due is None  # nothing will fire it
    unknown = evaluate_job(job, history(job), None, NOW)  # Temporal unreachable
    assert (unknown.next_due, unknown.next_due_source) == (NOW + timedelta(hours=1), "catalog")
    foreign = evaluate_job(job, history(job), ScheduleState(exists=True, managed=False), NOW)
    assert kinds(foreign) == {Kind.SCHEDULE_NOT_REGISTERED} and foreign.state == "not managed"


def test_a_paused_schedule_expects_no_runs():
    job = make_job()
    paused = ScheduleState(exists=True, paused=True, timing_since=SINCE)
    rows = history(job, until=NOW - timedelta(hours=6))
    status = evaluate_job(job, rows, paused, NOW)
    assert status.alerts == [] and status.state == "paused" and status.next_due is None
    assert evaluate_job(make_job(paused=True), rows, None, NOW).state == "paused"


def test_fall_back_night_a_fixed_time_job_runs_once_and_is_healthy():
    job = make_job(cron="30 1 * * *", timezone="America/New_York")
    now = datetime(2027, 11, 8, 12, 0, tzinfo=UTC)
    rows = history(job, now=now, since=now - timedelta(days=25))
    assert rows[-2].scheduled_at == datetime(2027, 11, 7, 5, 30, tzinfo=UTC)  # 01:30 EDT
    state = ScheduleState(exists=True, timing_since=now - timedelta(days=25))
    assert evaluate_job(job, rows, state, now).alerts == []


def test_spring_forward_a_fixed_time_job_is_due_at_the_end_of_the_gap():
    job = make_job(cron="30 2 * * *", timezone="America/New_York")
    gap_end = datetime(2027, 3, 14, 7, 0, tzinfo=UTC)  # 03:00 EDT
    state = ScheduleState(exists=True, timing_since=gap_end - timedelta(days=25))
    rows = history(job, now=gap_end, since=gap_end - timedelta(days=25))
    status = evaluate_job(job, rows, state, gap_end + timedelta(minutes=16))
    assert Kind.NOT_COMPLETED in kinds(status)
    assert "2027-03-14 07:00:00Z" in status.alerts[0].message
    rows.append(run(gap_end))
    assert evaluate_job(job, rows, state, gap_end + timedelta(minutes=16)).alerts == []


def test_an_hourly_job_on_the_fall_back_night_expects_25_runs():
    job = make_job(timezone="America/New_York")
    now = datetime(2027, 11, 8, 5, 30, tzinfo=UTC)
    rows = history(job, now=now)
    assert evaluate_job(job, rows, REGISTERED, now, lookback=timedelta(hours=25)).alerts == []
    del rows[-10]
    status = evaluate_job(job, rows, REGISTERED, now, lookback=timedelta(hours=25))
    assert "1 of 25 fire times" in status.alerts[0].message


def test_an_interval_job():
    job = make_job(cron=None, interval=timedelta(minutes=20))
    fires = job.timing.fire_times(SINCE, NOW - timedelta(minutes=1))
    rows = [run(f) for f in fires]
    assert evaluate_job(job, rows, REGISTERED, NOW).alerts == []
    assert kinds(evaluate_job(job, rows[:-3], REGISTERED, NOW)) == {
        Kind.NOT_COMPLETED,
        Kind.MISSED_RUNS,
    }


def test_the_report_exit_codes_and_outputs():
    job = make_job()
    healthy = evaluate([job], history(job), {job.id: REGISTERED}, OutboxState(0), NOW)
    assert (healthy.status, healthy.exit_code) == ("ok", 0)

    dead = OutboxState(3, NOW - timedelta(days=1), NOW)
    alerting = evaluate([job], history(job), {job.id: REGISTERED}, dead, NOW)
    assert (alerting.status, alerting.exit_code) == ("alert", 1)
    assert [(a.kind, a.job) for a in alerting.alerts] == [(Kind.DEAD_OUTBOX, "outbox")]
    data = to_json(alerting)
    assert data["alerts"][0]["kind"] == "dead_outbox" and data["outbox"]["dead"] == 3
    assert data["jobs"][0]["last_run"]["duration_seconds"] == 30.0
    text = format_report(alerting)
    assert "ALERT  outbox  dead_outbox  3 outbox message(s) are dead" in text
    assert text.endswith("status: alert (1 alert(s)) at 2027-11-10 12:00Z")

    # The database could not be read: no row-based alert, and the status is unknown.
    blind = evaluate(
        [job], None, {job.id: REGISTERED}, None, NOW, errors=["cannot read the database: x"]
    )
    assert (blind.status, blind.exit_code, blind.alerts) == ("unknown", 2, [])
    assert "ERROR  cannot read the database: x" in format_report(blind)


def test_each_job_is_judged_on_its_own_rows_only():
    healthy, stalled, silent = (make_job(id=name) for name in ("healthy", "stalled", "silent"))
    stalled_rows = history(stalled, until=NOW - timedelta(hours=3))  # its last three never ran
    rows = sorted(history(healthy) + stalled_rows, key=lambda r: (r.scheduled_at, r.job_name))
    states = {job.id: REGISTERED for job in (healthy, stalled, silent)}
    report = evaluate([healthy, stalled, silent], rows, states, OutboxState(0), NOW)
    by_job = {status.job: status for status in report.jobs}
    assert by_job["healthy"].alerts == []
    assert by_job["healthy"].last_run.scheduled_at == NOW - timedelta(hours=1)
    assert by_job["stalled"].last_run.scheduled_at == NOW - timedelta(hours=4)
    assert Kind.MISSED_RUNS in kinds(by_job["stalled"])
    assert by_job["silent"].last_run is None and Kind.MISSED_RUNS in kinds(by_job["silent"])


@pytest.mark.parametrize("grace", [timedelta(minutes=5), timedelta(hours=2)])
def test_alert_grace_is_read_per_job(grace):
    job = make_job(alert_grace=grace)
    rows = history(job, until=NOW - timedelta(minutes=59))
    late = NOW + grace + timedelta(minutes=1)
    assert Kind.NOT_COMPLETED in kinds(evaluate_job(job, rows, REGISTERED, late))
    early = NOW + grace - timedelta(minutes=1)
    assert Kind.NOT_COMPLETED not in kinds(evaluate_job(job, rows, REGISTERED, early))


def test_a_slot_its_calendar_moved_is_neither_missing_nor_overdue():
    """monthly-billing's 1 January 2027 (New Year's Day, a Friday) runs on Monday the
    4th: once that run completed the slot, check is quiet; before it, the slot is not due."""
    job = next(j for j in load_catalog() if j.id == "monthly-billing")
    since = datetime(2026, 11, 15, tzinfo=UTC)
    state = ScheduleState(exists=True, created_at=since, timing_since=since)
    slots = [f.slot for f in job.timing.fires(since, datetime(2027, 1, 5, tzinfo=UTC))]
    assert slots[-1] == datetime(2027, 1, 1, 8, tzinfo=UTC)
    monday = datetime(2027, 1, 4, 8, tzinfo=UTC)
    done = [run(s, job_name=job.id, started_at=max(s, monday)) for s in slots]
    assert evaluate_job(job, done, state, monday + timedelta(hours=3)).alerts == []
    assert evaluate_job(job, done[:-1], state, datetime(2027, 1, 3, tzinfo=UTC)).alerts == []
    late = evaluate_job(job, done[:-1], state, monday + timedelta(hours=3))
    assert kinds(late) == {Kind.NOT_COMPLETED, Kind.MISSED_RUNS}
