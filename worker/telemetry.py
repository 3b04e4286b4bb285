"""Traces and metrics for a worker process, set up by its entry point only.

- Traces: an OpenTelemetry SDK tracer provider and Temporal's `TracingInterceptor` (with
  `always_create_workflow_spans=True`, or schedule-started workflows, which arrive with no
  trace context, would get no spans; `worker/tracing.py` makes each such run one trace).
  Every span gets its trace and span ids in-process, so log lines carry a trace id; spans
  are recorded and leave the process only when the standard variables ask for it
  (`OTEL_TRACES_EXPORTER=otlp` or `console`, or an `OTEL_EXPORTER_OTLP[_TRACES]_ENDPOINT`),
  over OTLP http/protobuf; with no exporter they are not recorded (no one would read them),
  and workflows make none: their activities' spans still carry the run's trace id.
  `OTEL_SDK_DISABLED=true` turns spans off altogether.
- Metrics, with `METRICS_PORT` set: one Prometheus endpoint serving our per-job metrics
  (`activities/common/telemetry.py`), the database gauges (`worker/gauges.py`) and the Temporal
  SDK's own runtime metrics. The SDK core keeps those in Rust and serves them on a
  loopback port of its own (`CoreMetrics`), which the endpoint reads when it is scraped:
  drained into Python instead (a `MetricBuffer`, one update at a time under the GIL), they
  were 7% of a worker's Python time in a burst of runs (bench/fleet.py). Unset, nothing is
  recorded and no port is opened.
- The SDK core's own log lines are forwarded into Python logging, so they share the format.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

from opentelemetry import metrics, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from temporalio.client import Interceptor
from temporalio.runtime import (
    LogForwardingConfig,
    LoggingConfig,
    PrometheusConfig,
    Runtime,
    TelemetryConfig,
    TelemetryFilter,
)

from core.errors import SettingsError
from worker.gauges import DatabaseGauges
from worker.settings import Settings
from worker.tracing import RunTracingInterceptor

logger = logging.getLogger(__name__)

SERVICE_NAME = "scheduled-jobs-worker"
# Ports the SDK core's loopback endpoint tries before the worker gives up (`core_runtime`).
_CORE_PORT_ATTEMPTS = 5
_OTLP_PROTOCOL = "http/protobuf"


@dataclass
class Telemetry:
    """What a Temporal client needs to be traced and measured; see `connect(...)`."""

    interceptors: list[Interceptor] = field(default_factory=list)
    runtime: Runtime | None = None
    metrics_port: int | None = None


def resource() -> Resource:
    """The process's OpenTelemetry resource; `OTEL_SERVICE_NAME` and
    `OTEL_RESOURCE_ATTRIBUTES` apply as usual."""
    return Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or SERVICE_NAME})


def span_exporters_from_env(environ: dict[str, str] | None = None) -> list[SpanExporter]:
    """The span exporters the standard OTEL_* variables ask for; none by default.

    Unlike the OpenTelemetry default (`otlp`), nothing is exported unless
    `OTEL_TRACES_EXPORTER` names an exporter or an OTLP endpoint is set.
    """
    env = os.environ if environ is None else environ
    names = env.get("OTEL_TRACES_EXPORTER")
    if names is None:
        endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get(
            "OTEL_EXPORTER_OTLP_ENDPOINT"
        )
        wanted = ["otlp"] if endpoint else []
    else:
        wanted = [name.strip().lower() for name in names.split(",") if name.strip()]
    exporters: list[SpanExporter] = []
    for name in wanted:
        if name == "none":
            continue
        if name == "console":
            exporters.append(ConsoleSpanExporter())
        elif name == "otlp":
            protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get(
                "OTEL_EXPORTER_OTLP_PROTOCOL", _OTLP_PROTOCOL
            )
            if protocol != _OTLP_PROTOCOL:
                raise SettingsError(
                    f"OTEL_EXPORTER_OTLP_PROTOCOL: only {_OTLP_PROTOCOL} is supported "
                    f"(got {protocol!r}); point it at the collector's HTTP port, usually 4318"
                )
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporters.append(OTLPSpanExporter())
        else:
            raise SettingsError(
                f"OTEL_TRACES_EXPORTER: unsupported exporter {name!r} (use otlp, console or none)"
            )
    return exporters


def tracer_provider(exporters: list[SpanExporter]) -> TracerProvider:
    """A tracer provider exporting to `exporters`.

    With no exporter, spans are not recorded (unless `OTEL_TRACES_SAMPLER` says otherwise):
    each still gets its trace and span ids, which log lines carry and activities inherit,
    but nothing would read what a recorded span holds (about a tenth of a run's worker CPU
    in bench/fleet.py)."""
    sampler = None  # the SDK's: OTEL_TRACES_SAMPLER, else parent-based always-on
    if not exporters and not os.environ.get("OTEL_TRACES_SAMPLER"):
        sampler = ALWAYS_OFF
    provider = TracerProvider(resource=resource(), sampler=sampler)
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def setup_tracing(exporters: list[SpanExporter] | None = None) -> TracerProvider:
    """Install the global tracer provider, exporting to `exporters` (default: from env)."""
    provider = tracer_provider(span_exporters_from_env() if exporters is None else exporters)
    trace.set_tracer_provider(provider)
    return provider


def records_spans(provider: TracerProvider) -> bool:
    """Whether `provider` records spans: not when it samples none (`tracer_provider` with no
    exporter and no sampler asked for)."""
    return provider.sampler is not ALWAYS_OFF


def tracing_interceptors(workflow_spans: bool = True) -> list[Interceptor]:
    """Interceptors for the client; workers built on that client inherit them.
    `workflow_spans=False`: workflows carry their run's trace context but make no spans
    (`worker.tracing`), for a process whose spans are not recorded."""
    return [RunTracingInterceptor(workflow_spans=workflow_spans)]


def core_logging() -> LoggingConfig:
    """The SDK core's warnings and errors, through Python logging (`temporalio.core`)."""
    return LoggingConfig(
        filter=TelemetryFilter(core_level="WARN", other_level="ERROR"),
        forwarding=LogForwardingConfig(logger=logging.getLogger("temporalio.core")),
    )


def _free_loopback_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def core_runtime() -> tuple[Runtime, str]:
    """A Temporal runtime whose core serves the SDK's metrics on a free loopback port, and
    that endpoint's URL. Named as they were when drained into OpenTelemetry: `_total` on
    counters, `_milliseconds` on durations."""
    for attempt in range(_CORE_PORT_ATTEMPTS):
        address = f"127.0.0.1:{_free_loopback_port()}"
        prometheus = PrometheusConfig(
            bind_address=address, counters_total_suffix=True, unit_suffix=True
        )
        try:
            runtime = Runtime(telemetry=TelemetryConfig(logging=core_logging(), metrics=prometheus))
        except ValueError as exc:  # taken between the probe and the bind: another port
            if "in use" not in str(exc) or attempt == _CORE_PORT_ATTEMPTS - 1:
                raise
            continue
        return runtime, f"http://{address}/metrics"
    raise AssertionError("unreachable")


class CoreMetrics:
    """A prometheus_client collector: the SDK core's series, read from its loopback
    endpoint (`core_runtime`) each time ours is scraped. An unreadable core endpoint leaves
    them out of that scrape (and says so in the log), not ours."""

    def __init__(self, url: str, timeout: float = 5.0) -> None:
        self.url = url
        self.timeout = timeout

    def describe(self) -> list[Metric]:
        return []  # names not known up front; the registry checks no clash for them

    def collect(self) -> Iterator[Metric]:
        try:
            with urllib.request.urlopen(self.url, timeout=self.timeout) as response:
                text = response.read().decode()
        except OSError as exc:
            logger.warning("the Temporal SDK's metrics could not be read: %s", exc)
            return
        for family in text_string_to_metric_families(text):
            if family.type == "counter" and family.name.endswith("_total"):
                # The core names one counter `local_activity_total`: served as before,
                # `temporal_local_activity_total`, not with a second suffix.
                family.name = family.name.removesuffix("_total")
                for i, sample in enumerate(family.samples):
                    name = sample.name.replace("_total_total", "_total")
                    family.samples[i] = sample._replace(name=name)
            yield family


def _serve_metrics(port: int):
    from prometheus_client import start_http_server

    try:
        return start_http_server(port)
    except OSError as exc:
        raise SettingsError(f"METRICS_PORT: cannot listen on port {port}: {exc.strerror}") from None


@contextlib.asynccontextmanager
async def worker_telemetry(settings: Settings) -> AsyncIterator[Telemetry]:
    """Set up tracing, and metrics if `METRICS_PORT` is set, for this process's lifetime.

    On exit, flushes spans not yet exported and stops the metrics endpoint.
    """
    tracer_provider = setup_tracing()
    # Spans not recorded: workflows make none (a run's three, made and thrown away).
    telemetry = Telemetry(interceptors=tracing_interceptors(records_spans(tracer_provider)))
    try:
        if settings.metrics_port is None:
            telemetry.runtime = Runtime(telemetry=TelemetryConfig(logging=core_logging()))
            yield telemetry
            return

        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from opentelemetry.sdk.metrics import MeterProvider

        # No otel_scope_* labels: the alert rules match on job, status, reason only.
        meter_provider = MeterProvider(
            resource=resource(), metric_readers=[PrometheusMetricReader(scope_info_enabled=False)]
        )
        metrics.set_meter_provider(meter_provider)
        from prometheus_client import REGISTRY

        gauges = DatabaseGauges(settings.database_url.get_secret_value())
        gauges.register(meter_provider.get_meter("scheduled_jobs"))
        telemetry.runtime, core_url = core_runtime()
        core_metrics = CoreMetrics(core_url)
        REGISTRY.register(core_metrics)
        telemetry.metrics_port = settings.metrics_port
        try:
            server, thread = _serve_metrics(settings.metrics_port)
        except SettingsError:
            REGISTRY.unregister(core_metrics)
            raise
        logger.info(
            "metrics on http://0.0.0.0:%s/metrics",
            settings.metrics_port,
            extra={"metrics_port": settings.metrics_port},
        )
        try:
            yield telemetry
        finally:
            server.shutdown()
            thread.join(5)
            REGISTRY.unregister(core_metrics)
            gauges.close()
            meter_provider.shutdown()
    finally:
        # Flushes spans still queued for export; bounded by the exporter's own timeout.
        await asyncio.to_thread(tracer_provider.shutdown)
