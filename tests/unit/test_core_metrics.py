"""The Temporal SDK core's metrics, served by its own loopback endpoint and read by ours at
scrape time (`worker.telemetry.core_runtime`, `CoreMetrics`): real runtimes, real ports."""

from __future__ import annotations

import logging
import socket
from datetime import timedelta

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from worker import telemetry
from worker.telemetry import CoreMetrics, core_runtime


def served(registry: CollectorRegistry) -> dict[str, float]:
    """Sample name -> value of everything `registry` exposes."""
    text = generate_latest(registry).decode()
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}


# Series made here through the runtime's meter have no `temporal_` prefix: the core puts it
# on its own (tests/integration/test_telemetry.py reads those from a real worker).


def test_the_cores_series_are_served_through_ours_as_the_sdk_names_them():
    runtime, url = core_runtime()
    assert url.startswith("http://127.0.0.1:")
    meter = runtime.metric_meter
    meter.create_counter("request").add(3)
    # The core's one counter whose name already ends in `_total` keeps a single suffix.
    meter.create_counter("local_activity_total").add(2)
    meter.create_gauge("num_pollers").set(5)
    registry = CollectorRegistry()
    registry.register(CoreMetrics(url))

    values = served(registry)

    assert values["request_total"] == 3
    assert values["local_activity_total"] == 2
    assert "local_activity_total_total" not in values
    assert values["num_pollers"] == 5


def test_a_duration_histogram_is_served_in_milliseconds():
    runtime, url = core_runtime()
    runtime.metric_meter.create_histogram_timedelta("workflow_task_execution_latency").record(
        timedelta(milliseconds=40)
    )
    registry = CollectorRegistry()
    registry.register(CoreMetrics(url))

    values = served(registry)

    assert values["workflow_task_execution_latency_milliseconds_count"] == 1
    assert values["workflow_task_execution_latency_milliseconds_sum"] == 40


def test_an_unreadable_core_endpoint_leaves_its_series_out_and_says_so(caplog):
    with socket.socket() as sock:  # a port nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    registry = CollectorRegistry()
    registry.register(CoreMetrics(f"http://127.0.0.1:{port}/metrics", timeout=2))

    with caplog.at_level(logging.WARNING, logger="worker.telemetry"):
        assert served(registry) == {}

    assert "the Temporal SDK's metrics could not be read" in caplog.text


def test_a_port_taken_between_probe_and_bind_is_retried_on_another(monkeypatch):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        probes = [port]
        real_probe = telemetry._free_loopback_port
        monkeypatch.setattr(
            telemetry, "_free_loopback_port", lambda: probes.pop() if probes else real_probe()
        )

        runtime, url = core_runtime()

    runtime.metric_meter.create_counter("request").add(1)
    assert not url.endswith(f":{port}/metrics")
    registry = CollectorRegistry()
    registry.register(CoreMetrics(url))
    assert served(registry)["request_total"] == 1


def test_a_port_always_taken_fails_after_the_attempts(monkeypatch):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setattr(telemetry, "_free_loopback_port", lambda: port)

        with pytest.raises(ValueError, match="in use"):
            core_runtime()
