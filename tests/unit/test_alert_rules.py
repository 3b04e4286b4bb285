"""deploy/prometheus/alerts.yml: valid, documented, on exported metrics, in line with the catalog."""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import yaml

from core import metric_names
from schedules.catalog.compile import job_run
from schedules.catalog.model import load_catalog
from schedules.health.runtime import FAILING, MISSED
from schedules.health.status import DEFAULT_GRACE, Kind

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "alerts.yml"
PROMTOOL = shutil.which("promtool")
HISTOGRAMS = {metric_names.DURATION, metric_names.LATENESS}
BUILTIN = {"up"}  # made by Prometheus itself for every scrape target
THRESHOLD = "scheduled_job:alert_after_seconds"

# Which Prometheus alert stands for each alert of `python -m schedules check`.
ALERT_FOR_KIND = {
    Kind.NOT_COMPLETED: "ScheduledJobNotCompleted",
    Kind.MISSED_RUNS: "ScheduledJobNotCompleted",
    Kind.LAST_RUN_FAILED: "ScheduledJobRunFailed",
    Kind.CATCHUP_GAP: "ScheduledJobCatchupGap",
    Kind.SLOW_RUN: "ScheduledJobDurationTrendingUp",
    Kind.DEAD_OUTBOX: "OutboxDeadMessages",
    Kind.SCHEDULE_NOT_REGISTERED: None,  # Temporal state, not a worker metric
    Kind.BACKFILL_SKIPPED: None,  # the server's scheduler history, not a worker metric
    Kind.DEPENDENCY_OVERDUE: None,  # the ledger's wait records (dependency_waits), read by check
    # A tenant held at its limit is expected under a burst: check names it, the gauge
    # scheduled_job_runtime_deferred counts its schedules; no page.
    Kind.TENANT_DEFERRED: None,
    Kind.AUTO_PAUSED: None,  # the schedule's own state, read by check
}


# Which Prometheus alert stands for each alert `check` raises of runtime schedules
# (`schedules.health.runtime`: the same kinds, about `runtime:<kind>`), and its gauge.
RUNTIME_ALERTS = {
    MISSED: ("RuntimeSchedulesBehind", metric_names.RUNTIME_BEHIND),
    FAILING: ("RuntimeSchedulesFailing", metric_names.RUNTIME_FAILING),
}


def rules() -> list[dict]:
    data = yaml.safe_load(RULES.read_text())
    return [rule for group in data["groups"] for rule in group["rules"]]


def alerts() -> list[dict]:
    return [rule for rule in rules() if "alert" in rule]


_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGES = re.compile(r"\[[^\]]*\]")
_LABEL_LISTS = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_NAME = re.compile(r"(?<![\w:.])([a-zA-Z_:][\w:]*)(\s*\()?")
_KEYWORDS = {"and", "or", "unless", "offset", "bool", "by", "on", "without", "ignoring"}


def metric_names_in(expr: str) -> set[str]:
    """The series names an expression selects (not functions, keywords or label names)."""
    for pattern in (_STRINGS, _MATCHERS, _RANGES, _LABEL_LISTS):
        expr = pattern.sub(" ", expr)
    return {
        name
        for name, call in _NAME.findall(expr)
        if not call and name not in _KEYWORDS and name.lower() not in {"inf", "nan"}
    }


def exported(name: str, recorded: set[str]) -> bool:
    if name in metric_names.ALL or name in recorded or name in BUILTIN:
        return True
    base, _, suffix = name.rpartition("_")
    return suffix in {"bucket", "sum", "count"} and base in HISTOGRAMS


def test_the_metric_name_extractor_sees_through_promql():
    expr = (
        'sum by (job, le) (rate(scheduled_job_duration_seconds_bucket{status="x"}[7d] '
        'offset 1d)) > on (job) scheduled_job:alert_after_seconds and absent(up{job="w"} == 1)'
        ' or label_replace(vector(1), "job", "a", "", "") unless scheduled_job_runs_totl'
    )
    assert metric_names_in(expr) == {
        "scheduled_job_duration_seconds_bucket",
        "scheduled_job:alert_after_seconds",
        "up",
        "scheduled_job_runs_totl",
    }
    assert not exported("scheduled_job_runs_totl", set())
    assert not exported("scheduled_job_last_success_timestamp_seconds_bucket", set())


def test_every_metric_in_the_rules_is_one_the_workers_export():
    recorded = {rule["record"] for rule in rules() if "record" in rule}
    for rule in rules():
        unknown = {n for n in metric_names_in(rule["expr"]) if not exported(n, recorded)}
        assert not unknown, f"{rule.get('alert') or rule['record']}: unknown metrics {unknown}"


def test_every_alert_has_a_severity_a_summary_a_description_and_a_runbook():
    names = [rule["alert"] for rule in alerts()]
    assert len(names) == len(set(names))
    for rule in alerts():
        assert rule["labels"]["severity"] in {"critical", "warning"}, rule["alert"]
        for key in ("summary", "description", "runbook"):
            assert len(rule["annotations"].get(key, "").strip()) > 20, (rule["alert"], key)


def test_every_check_alert_has_a_prometheus_counterpart():
    assert set(ALERT_FOR_KIND) == set(Kind)
    names = {rule["alert"] for rule in alerts()}
    assert {name for name in ALERT_FOR_KIND.values() if name} <= names


def test_every_runtime_check_alert_has_a_prometheus_counterpart_on_its_gauge():
    by_name = {rule["alert"]: rule for rule in alerts()}
    for name, gauge in RUNTIME_ALERTS.values():
        assert metric_names_in(by_name[name]["expr"]) == {gauge}, name
        assert "by (kind)" in by_name[name]["expr"], "runtime alerts are per kind, never per tenant"


def expected_thresholds(year: int, jobs: list | None = None) -> dict[str, int]:
    """Per catalog job: longest gap between fire times in `year` + jitter + alert grace,
    walking the fire times (a job firing more than hourly, in a zone without offset
    changes, repeats its day: its gap is its day's)."""
    thresholds = {}
    for job in load_catalog() if jobs is None else jobs:
        interval = getattr(job, "interval", None)
        if interval is not None:
            gap = interval
        else:
            start = datetime(year, 1, 1, tzinfo=UTC)
            end = datetime(year + 1, 1, 1, tzinfo=UTC)
            frequent = len(job.timing.fire_times(start, start + timedelta(days=1))) > 24
            if frequent and job.calendar is None:
                assert job.timezone == "UTC", job.id  # the shortcut needs a fixed offset
                end = start + timedelta(days=2)
            times = job.timing.fire_times(start, end + timedelta(days=40))
            gap = max(
                b - a
                for a, b in itertools.pairwise(times)
                if a.astimezone(ZoneInfo(job.timezone)).year == year and a < end
            )
        extra = getattr(job, "jitter", timedelta(0)) + getattr(job, "alert_grace", DEFAULT_GRACE)
        # A run may wait for its upstreams (nightly-reconcile: hourly-sync, 2h) first.
        extra += max((d.within for d in getattr(job, "depends_on", ())), default=timedelta(0))
        thresholds[job.id] = int((gap + extra).total_seconds())
    return thresholds


def test_sync_gives_every_job_its_not_completed_threshold():
    """The threshold the workers export comes from the schedule's run input: the longest
    gap of the sync's year and the next (it lives until the next sync)."""
    for year in (2025, 2026, 2027):
        now = datetime(year, 6, 1, tzinfo=UTC)
        exported_ = {
            job.id: int(job_run(job, now=now).alert_after_seconds) for job in load_catalog()
        }
        this, following = expected_thresholds(year), expected_thresholds(year + 1)
        assert exported_ == {job: max(this[job], following[job]) for job in this}


def test_a_sync_a_year_before_a_longer_gap_gives_it_its_threshold():
    """monthly-billing (03:00 New York on the 1st): 1 October to 1 November 2026 is 31 days
    and an hour (New York falls back on 1 November, before 03:00); in 2025 and 2027 that
    month is 31 days. Synced in 2025, the threshold must already cover it, or `check` and
    the alert page on 1 November 2026 while the run is on time."""
    (billing,) = [job for job in load_catalog() if job.id == "monthly-billing"]
    assert billing.cron == "0 3 1 * *" and billing.timezone == "America/New_York"
    # Its business calendar moves some 1sts (its own gaps: test_business_calendar.py);
    # the rule here is the time zone's, so the job is taken without it.
    billing = billing.model_copy(
        update={"calendar": None, "on_holiday": None, "calendar_definition": None}
    )
    grace = billing.jitter + billing.alert_grace
    october = timedelta(days=31, hours=1)
    assert (
        expected_thresholds(2026, [billing])["monthly-billing"] == (october + grace).total_seconds()
    )
    assert (
        expected_thresholds(2025, [billing])["monthly-billing"] < (october + grace).total_seconds()
    )
    for now in (datetime(2025, 6, 1, tzinfo=UTC), datetime(2026, 10, 31, tzinfo=UTC)):
        assert job_run(billing, now=now).alert_after_seconds == (october + grace).total_seconds()
    # The year is the job's, not UTC's: 2027-01-01T03:00Z is still 2026 in New York (by
    # UTC's year, 2027 and 2028 would give 31 days).
    assert (
        expected_thresholds(2028, [billing])["monthly-billing"] < (october + grace).total_seconds()
    )
    new_years_eve = datetime(2027, 1, 1, 3, tzinfo=UTC)
    assert (
        job_run(billing, now=new_years_eve).alert_after_seconds == (october + grace).total_seconds()
    )


def test_the_not_completed_threshold_is_one_rule_for_every_job():
    (rule,) = [r for r in rules() if r.get("record") == THRESHOLD]
    assert metric_names_in(rule["expr"]) == {metric_names.ALERT_AFTER}


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (Debian package prometheus)")
def test_promtool_accepts_the_rules():
    done = subprocess.run(
        [PROMTOOL, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


# Series and expected alerts for `promtool test rules`. The annotations are left out of the
# copy of the rules under test (promtool would compare them whole); `check rules` above
# validates their templates. Week-long series are evaluated hourly, to stay fast.
PROMTOOL_WEEK_TESTS = """
rule_files: [rules.yml]
evaluation_interval: 1h
tests:
  - name: duration trending up against the week before
    interval: 1h
    input_series:
      - {series: 'scheduled_job_duration_seconds_bucket{job="j", le="10"}', values: '0x208'}
      - {series: 'scheduled_job_duration_seconds_bucket{job="j", le="30"}', values: '0+1x168 168x39'}
      - {series: 'scheduled_job_duration_seconds_bucket{job="j", le="120"}', values: '0+1x168 168x39'}
      - {series: 'scheduled_job_duration_seconds_bucket{job="j", le="300"}', values: '0+1x208'}
      - {series: 'scheduled_job_duration_seconds_bucket{job="j", le="+Inf"}', values: '0+1x208'}
      - {series: 'scheduled_job_duration_seconds_count{job="j"}', values: '0+1x208'}
      - {series: 'scheduled_job_duration_seconds_sum{job="j"}', values: '0+25x168 4450+250x39'}
    alert_rule_test:
      - {alertname: ScheduledJobDurationTrendingUp, eval_time: 150h, exp_alerts: []}
      - alertname: ScheduledJobDurationTrendingUp
        eval_time: 200h
        exp_alerts: [{exp_labels: {severity: warning, job: j}}]
"""

PROMTOOL_TESTS = """
rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  - name: not completed after the longest gap + grace
    interval: 10m
    input_series:
      - series: 'scheduled_job_last_success_timestamp_seconds{job="invoice-reminders", instance="a"}'
        values: '0x200'
      - series: 'scheduled_job_last_success_timestamp_seconds{job="invoice-reminders", instance="b"}'
        values: '0x200'
      - series: 'scheduled_job_alert_after_seconds{job="invoice-reminders", instance="a"}'
        values: '90900x200'
      - series: 'scheduled_job_alert_after_seconds{job="invoice-reminders", instance="b"}'
        values: '90900x200'
    alert_rule_test:
      - {alertname: ScheduledJobNotCompleted, eval_time: 25h10m, exp_alerts: []}
      - alertname: ScheduledJobNotCompleted
        eval_time: 25h20m
        exp_alerts: [{exp_labels: {severity: critical, job: invoice-reminders}}]

  - name: failed runs, including a counter series born at its first failure
    interval: 10m
    input_series:
      - series: 'scheduled_job_runs_total{job="invoice-reminders", status="failed", instance="a"}'
        values: '0x12 1x30'
      - series: 'scheduled_job_runs_total{job="other-job", status="failed", instance="b"}'
        values: '_x24 1x20'
      - series: 'scheduled_job_runs_total{job="invoice-reminders", status="completed", instance="a"}'
        values: '0+1x44'
    alert_rule_test:
      - {alertname: ScheduledJobRunFailed, eval_time: 1h, exp_alerts: []}
      - alertname: ScheduledJobRunFailed
        eval_time: 2h20m
        exp_alerts: [{exp_labels: {severity: critical, job: invoice-reminders}}]
      - alertname: ScheduledJobRunFailed
        eval_time: 4h10m
        exp_alerts: [{exp_labels: {severity: critical, job: other-job}}]
      - {alertname: ScheduledJobRunFailed, eval_time: 6h, exp_alerts: []}

  - name: catch-up gaps
    interval: 10m
    input_series:
      - series: 'scheduled_job_catchup_gap_runs_total{job="invoice-reminders", instance="a"}'
        values: '0x6 40x30'
    alert_rule_test:
      - alertname: ScheduledJobCatchupGap
        eval_time: 1h30m
        exp_alerts: [{exp_labels: {severity: warning, job: invoice-reminders}}]
      - {alertname: ScheduledJobCatchupGap, eval_time: 4h, exp_alerts: []}

  - name: dead outbox messages
    interval: 1m
    input_series:
      - {series: 'outbox_messages_dead{instance="a"}', values: '0 0 3 3'}
      - {series: 'outbox_messages_dead{instance="b"}', values: '0 0 3 3'}
    alert_rule_test:
      - {alertname: OutboxDeadMessages, eval_time: 1m, exp_alerts: []}
      - alertname: OutboxDeadMessages
        eval_time: 3m
        exp_alerts: [{exp_labels: {severity: warning}}]

  - name: workers down, then none at all, then no database gauges
    interval: 1m
    input_series:
      - {series: 'up{job="scheduled-jobs-worker", instance="a"}', values: '1x5 0x20'}
      - {series: 'up{job="scheduled-jobs-worker", instance="b"}', values: '1x12 0x13'}
      - {series: 'outbox_messages_pending{instance="a"}', values: '0x5'}
    alert_rule_test:
      - alertname: ScheduledJobsWorkerDown
        eval_time: 12m
        exp_alerts:
          - exp_labels: {severity: warning, job: scheduled-jobs-worker, instance: a}
      - {alertname: ScheduledJobsNoWorker, eval_time: 12m, exp_alerts: []}
      - alertname: ScheduledJobsNoWorker
        eval_time: 19m
        exp_alerts: [{exp_labels: {severity: critical}}]
      - {alertname: ScheduledJobsMetricsMissing, eval_time: 12m, exp_alerts: []}
      - alertname: ScheduledJobsMetricsMissing
        eval_time: 22m
        exp_alerts: [{exp_labels: {severity: warning}}]
"""


def runtime_gauges_test() -> dict:
    """The runtime alerts' promtool case: weekly-report schedules behind (both replicas
    report the gauge) then caught up, and failing then fine; test-noop at 0 stays quiet."""

    def gauge(name: str, kind: str, instance: str, values: str) -> dict:
        return {"series": f'{name}{{kind="{kind}", instance="{instance}"}}', "values": values}

    def expect(alert: str, minutes: int, severity: str | None = None) -> dict:
        labels = {"severity": severity, "kind": "weekly-report"}
        fired = [{"exp_labels": labels}] if severity else []
        return {"alertname": alert, "eval_time": f"{minutes}m", "exp_alerts": fired}

    behind, failing = metric_names.RUNTIME_BEHIND, metric_names.RUNTIME_FAILING
    return {
        "name": "runtime schedules of one kind behind, failing, then fine",
        "interval": "1m",
        "input_series": [
            gauge(behind, "weekly-report", "a", "0x3 120x10 0x5"),
            gauge(behind, "weekly-report", "b", "0x3 120x10 0x5"),
            gauge(behind, "test-noop", "a", "0x18"),
            gauge(failing, "weekly-report", "a", "0 0 3 3 0"),
        ],
        "alert_rule_test": [
            expect("RuntimeSchedulesBehind", 5),
            expect("RuntimeSchedulesBehind", 7, "critical"),  # 2 minutes above 0
            expect("RuntimeSchedulesBehind", 16),
            expect("RuntimeSchedulesFailing", 1),
            expect("RuntimeSchedulesFailing", 3, "warning"),
            expect("RuntimeSchedulesFailing", 4),
        ],
    }


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (Debian package prometheus)")
def test_promtool_rule_tests_fire_each_alert_when_they_should(tmp_path):
    data = yaml.safe_load(RULES.read_text())
    for group in data["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(data, sort_keys=False))
    tests = yaml.safe_load(PROMTOOL_TESTS)
    tests["tests"].append(runtime_gauges_test())
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests, sort_keys=False))
    (tmp_path / "week.yml").write_text(PROMTOOL_WEEK_TESTS)
    done = subprocess.run(
        [PROMTOOL, "test", "rules", "tests.yml", "week.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
