"""Traces and metrics for a worker process, set up by its entry point only.

- Traces: an OpenTelemetry SDK tracer provider and Temporal's `TracingInterceptor` (with
  `always_create_workflow_spans=True`, or schedule-started workflows, which arrive with no
  trace context, would get no spans; `worker/tracing.py` makes each such run one trace).
  Every span gets its trace and span ids in-process, so log lines carry a trace id; spans
  are recorded and leave the process only when the standard variables ask for it
  (`OTEL_TRACES_EXPORTER=otlp` or `console`, or an `OTEL_EXPORTER_OTLP[_TRACES]_ENDPOINT`),
  over OTLP http/protobuf; with no exporter they are not recorded (no one would read them).
  `OTEL_SDK_DISABLED=true` turns spans off altogether.
- Metrics, with `METRICS_PORT` set: one Prometheus endpoint serving our per-job metrics
  (`activities/telemetry.py`), the database gauges (`worker/gauges.py`) and the Temporal
  SDK's own runtime metrics, which a `MetricBuffer` drains into the same OpenTelemetry meter
  provider. Unset, nothing is recorded and no port is opened.
- The SDK core's own log lines are forwarded into Python logging, so they share the format.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from opentelemetry import metrics, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from temporalio.client import Interceptor
from temporalio.contrib.opentelemetry import MetricsExporter
from temporalio.runtime import (
    LogForwardingConfig,
    LoggingConfig,
    MetricBuffer,
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
# Updates the SDK core buffers between two drains (one a second); far above a worker's rate.
_METRIC_BUFFER_SIZE = 100_000
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


def tracing_interceptors() -> list[Interceptor]:
    """Interceptors for the client; workers built on that client inherit them."""
    return [RunTracingInterceptor()]


def core_logging() -> LoggingConfig:
    """The SDK core's warnings and errors, through Python logging (`temporalio.core`)."""
    return LoggingConfig(
        filter=TelemetryFilter(core_level="WARN", other_level="ERROR"),
        forwarding=LogForwardingConfig(logger=logging.getLogger("temporalio.core")),
    )


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
    telemetry = Telemetry(interceptors=tracing_interceptors())
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
        gauges = DatabaseGauges(settings.database_url.get_secret_value())
        gauges.register(meter_provider.get_meter("scheduled_jobs"))
        buffer = MetricBuffer(_METRIC_BUFFER_SIZE)
        telemetry.runtime = Runtime(
            telemetry=TelemetryConfig(logging=core_logging(), metrics=buffer)
        )
        telemetry.metrics_port = settings.metrics_port
        server, thread = _serve_metrics(settings.metrics_port)
        logger.info(
            "metrics on http://0.0.0.0:%s/metrics",
            settings.metrics_port,
            extra={"metrics_port": settings.metrics_port},
        )
        try:
            async with MetricsExporter(buffer, meter_provider):
                yield telemetry
        finally:
            server.shutdown()
            thread.join(5)
            gauges.close()
            meter_provider.shutdown()
    finally:
        # Flushes spans still queued for export; bounded by the exporter's own timeout.
        await asyncio.to_thread(tracer_provider.shutdown)
