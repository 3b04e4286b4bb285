"""The Temporal SDK series the Grafana dashboard draws are served by a real worker.

tests/unit/test_grafana.py holds the dashboard to our metric names and to a short list of
SDK series (worker slots, pollers); this scrapes a real `python -m worker` to show each of
those exists under that name, as the OpenTelemetry Prometheus exporter writes it.
"""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from devstack import free_port
from tests.helpers import assert_eventually
from tests.unit.test_grafana import SDK_METRICS, sdk_metrics_used


def scrape(port: int) -> dict[str, set[str]]:
    """Series name -> the values of its `worker_type` or `poller_type` labels."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    found: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            kind = sample.labels.get("worker_type") or sample.labels.get("poller_type") or ""
            found.setdefault(sample.name, set()).add(kind)
    return found


async def test_the_dashboards_sdk_series_are_served_by_a_worker(start_workers):
    assert sdk_metrics_used() == SDK_METRICS
    port = free_port()
    start_workers(1, METRICS_PORT=str(port))

    async def all_served():
        served = scrape(port)
        missing = SDK_METRICS - set(served)
        assert not missing, f"not (yet) served: {sorted(missing)}"
        return served

    served = await assert_eventually(all_served, timeout=60)
    # The slot gauges are per worker type: the activity slots are the ones that fill up.
    assert "ActivityWorker" in served["temporal_worker_task_slots_used"]
    assert "ActivityWorker" in served["temporal_worker_task_slots_available"]
