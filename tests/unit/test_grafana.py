"""deploy/grafana: the dashboard an operator looks at instead of reading metrics.

Its queries may name only series the system exports: our metrics (core/metric_names.py,
histograms with their _bucket/_sum/_count), the recording rules of
deploy/prometheus/alerts.yml, Prometheus' own `up`, and the Temporal SDK gauges listed here
(tests/integration/test_dashboard_metrics.py scrapes a real worker for those). It must
show what the issue asks for: runs, failures, lateness, duration, catch-up gaps, outbox
pending and dead, worker slots.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from core import metric_names
from tests.unit.test_alert_rules import metric_names_in

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "scheduled-jobs.json"
DATASOURCES = ROOT / "deploy" / "grafana" / "provisioning" / "datasources" / "prometheus.yml"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
PROMTOOL = shutil.which("promtool")

# The Temporal SDK's own series the dashboard uses (worker slots, pollers).
SDK_METRICS = frozenset(
    {
        "temporal_worker_task_slots_available",
        "temporal_worker_task_slots_used",
        "temporal_num_pollers",
    }
)
HISTOGRAMS = {metric_names.DURATION, metric_names.LATENESS}
PER_JOB = {
    metric_names.RUNS,
    metric_names.DURATION,
    metric_names.LATENESS,
    metric_names.LAST_SUCCESS,
    metric_names.SKIPS,
    metric_names.CATCHUP_GAPS,
}
# Grafana's variables, as Prometheus would see them once Grafana has substituted them.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h", "$job": ".*"}
_LABEL_VALUES = re.compile(r"^label_values\((?:(?P<metric>[a-zA-Z_:][\w:]*)\s*,\s*)?\w+\)$")


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def panels(items: list[dict] | None = None) -> Iterator[dict]:
    for panel in dashboard()["panels"] if items is None else items:
        yield panel
        yield from panels(panel.get("panels", []))


def queries() -> list[str]:
    return [t["expr"] for p in panels() for t in p.get("targets", [])]


def series(name: str) -> str:
    """The metric family a series name belongs to."""
    base, _, suffix = name.rpartition("_")
    return base if suffix in {"bucket", "sum", "count"} and base in HISTOGRAMS else name


def recorded() -> set[str]:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return {rule["record"] for group in groups for rule in group["rules"] if "record" in rule}


def used_metrics() -> set[str]:
    """Every series name the dashboard's queries and variables select."""
    names = {name for expr in queries() for name in metric_names_in(expr)}
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] == "query":
            match = _LABEL_VALUES.match(variable["query"]["query"])
            assert match, f"variable {variable['name']}: only label_values(...) is checked"
            names.add(match["metric"])
    return names


def sdk_metrics_used() -> set[str]:
    return {name for name in used_metrics() if name.startswith("temporal_")}


def test_queries_use_only_exported_metric_names():
    allowed = set(metric_names.ALL) | recorded() | {"up"} | SDK_METRICS
    unknown = {name for name in used_metrics() if series(name) not in allowed}
    assert not unknown, f"not exported by the workers: {sorted(unknown)}"


def test_the_extractor_sees_the_dashboards_names():
    # The control for the test above: it does find names, ours and the SDK's.
    assert metric_names.RUNS in used_metrics()
    assert sdk_metrics_used() == SDK_METRICS


@pytest.mark.parametrize(
    ("what", "names"),
    [
        ("runs", {metric_names.RUNS}),
        ("lateness", {metric_names.LATENESS}),
        ("duration", {metric_names.DURATION}),
        ("catch-up gaps", {metric_names.CATCHUP_GAPS}),
        ("outbox pending", {metric_names.OUTBOX_PENDING}),
        ("outbox dead", {metric_names.OUTBOX_DEAD}),
        ("time since last success", {metric_names.LAST_SUCCESS}),
        (
            "worker slots",
            {"temporal_worker_task_slots_used", "temporal_worker_task_slots_available"},
        ),
        ("workers up", {"up"}),
    ],
)
def test_the_dashboard_shows(what, names):
    shown = {series(name) for name in used_metrics()}
    assert names <= shown, f"no panel shows {what}"


def test_failures_have_their_own_panel():
    titles = {
        p["title"] for p in panels() for t in p.get("targets", []) if 'status="failed"' in t["expr"]
    }
    assert titles, "no query selects failed runs"


def test_per_job_queries_follow_the_job_variable():
    variables = {v["name"]: v for v in dashboard()["templating"]["list"]}
    assert variables["job"]["includeAll"] and variables["job"]["allValue"] == ".*"
    for expr in queries():
        if {series(n) for n in metric_names_in(expr)} & PER_JOB:
            assert 'job=~"$job"' in expr, expr


def test_panels_query_the_provisioned_prometheus():
    variables = {v["name"]: v for v in dashboard()["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    (source,) = yaml.safe_load(DATASOURCES.read_text())["datasources"]
    assert source["type"] == "prometheus"
    for panel in panels():
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"], panel["title"]


def test_panel_ids_are_unique_and_every_panel_is_explained():
    ids = [p["id"] for p in panels()]
    assert len(ids) == len(set(ids))
    for panel in panels():
        if panel["type"] != "row":
            assert len(panel.get("description", "")) > 20, panel["title"]
    assert dashboard()["uid"] == "scheduled-jobs"


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (Debian package prometheus)")
def test_promtool_parses_every_query(tmp_path):
    rules = []
    for i, expr in enumerate(queries()):
        for variable, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(variable, value)
        rules.append({"record": f"dashboard:query_{i}", "expr": expr})
    path = tmp_path / "queries.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    done = subprocess.run(
        [PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
