"""Log lines: JSON that parses, text that greps, the run's fields and the trace ids."""

from __future__ import annotations

import io
import json
import logging
from datetime import UTC, datetime

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from core.errors import SettingsError
from worker.logs import JsonFormatter, TextFormatter, TraceContextFilter, configure_logging
from worker.settings import Settings
from worker.telemetry import records_spans, span_exporters_from_env, tracer_provider
from worker.tracing import run_trace_id

SLOT = datetime(2026, 11, 29, 2, 30, tzinfo=UTC)
# What the SDK's activity logger puts on a record, beside our own `extra=` fields.
ACTIVITY_CONTEXT = {
    "activity_id": "2",
    "activity_type": "claim_execution",
    "attempt": 3,
    "namespace": "default",
    "task_queue": "scheduled-jobs",
    "workflow_id": "invoice-reminders-2026-11-29T02:30:00Z",
    "workflow_run_id": "0192-run",
    "workflow_type": "ScheduledJobWorkflow",
}


@pytest.fixture
def capture():
    """A logger whose lines, formatted by `formatter`, land in a string."""
    stream = io.StringIO()
    logger = logging.getLogger(f"test-logging-{id(stream)}")
    logger.propagate = False
    logger.setLevel(logging.INFO)

    def use(formatter: logging.Formatter):
        handler = logging.StreamHandler(stream)
        handler.setFormatter(formatter)
        handler.addFilter(TraceContextFilter())
        logger.handlers[:] = [handler]
        return logger, stream

    return use


# The fields of the claim both formatters are shown.
CLAIMED = {
    "job": "invoice-reminders",
    "scheduled_at": SLOT,
    "execution_id": 7,
    "temporal_activity": ACTIVITY_CONTEXT,
}


def log_in_span(logger: logging.Logger, message: str, **extra) -> trace.SpanContext:
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("db.claim_execution") as span:
        logger.info(message, extra=extra)
    return span.get_span_context()


def test_a_json_line_parses_and_carries_the_run_fields_and_trace(capture):
    logger, stream = capture(JsonFormatter())
    context = log_in_span(logger, "execution claimed", **CLAIMED)
    (line,) = stream.getvalue().splitlines()
    entry = json.loads(line)
    assert entry["message"] == "execution claimed"
    assert entry["level"] == "INFO" and entry["logger"] == logger.name
    assert datetime.fromisoformat(entry["time"]).tzinfo is not None
    assert entry["job"] == "invoice-reminders"
    assert entry["scheduled_at"] == "2026-11-29T02:30:00+00:00"
    assert entry["execution_id"] == 7
    assert entry["workflow_id"] == ACTIVITY_CONTEXT["workflow_id"]
    assert entry["workflow_run_id"] == "0192-run"
    assert entry["activity_type"] == "claim_execution" and entry["attempt"] == 3
    assert entry["trace_id"] == format(context.trace_id, "032x")
    assert entry["span_id"] == format(context.span_id, "016x")
    assert "temporal_activity" not in entry and "task_queue" not in entry


def test_explicit_fields_win_over_the_sdk_context(capture):
    logger, stream = capture(JsonFormatter())
    logger.info("taken over", extra={"attempt": 2, "temporal_activity": ACTIVITY_CONTEXT})
    assert json.loads(stream.getvalue())["attempt"] == 2


def test_workflow_logger_context_is_flattened(capture):
    logger, stream = capture(JsonFormatter())
    logger.info(
        "run started",
        extra={
            "temporal_workflow": {
                "workflow_id": "invoice-reminders-2026-11-29T02:30:00Z",
                "run_id": "0192-run",
                "workflow_type": "ScheduledJobWorkflow",
                "attempt": 1,
            }
        },
    )
    entry = json.loads(stream.getvalue())
    assert entry["workflow_id"] == "invoice-reminders-2026-11-29T02:30:00Z"
    assert entry["workflow_run_id"] == "0192-run"
    assert entry["workflow_type"] == "ScheduledJobWorkflow"


def test_outside_a_span_there_is_no_trace_id(capture):
    logger, stream = capture(JsonFormatter())
    logger.info("worker ready", extra={"task_queue": "scheduled-jobs"})
    entry = json.loads(stream.getvalue())
    assert "trace_id" not in entry and entry["task_queue"] == "scheduled-jobs"


def test_an_exception_stays_inside_its_json_line(capture):
    logger, stream = capture(JsonFormatter())
    try:
        raise ValueError("bad\nthing")
    except ValueError:
        logger.exception("failed", extra={"job": "invoice-reminders", "odd": object()})
    (line,) = stream.getvalue().splitlines()
    entry = json.loads(line)
    assert "ValueError: bad\nthing" in entry["exception"]
    assert entry["odd"].startswith("<object object")


def test_a_text_line_puts_the_run_fields_after_the_message(capture):
    logger, stream = capture(TextFormatter())
    context = log_in_span(
        logger, "execution claimed", **CLAIMED, reason="missed deadline: 3600s late"
    )
    line = stream.getvalue().strip()
    assert " INFO " in line
    fields = line.split("execution claimed ", 1)[1]
    assert fields.startswith(
        "job=invoice-reminders scheduled_at=2026-11-29T02:30:00+00:00 execution_id=7 attempt=3 "
        "workflow_id=invoice-reminders-2026-11-29T02:30:00Z "
    )
    assert 'reason="missed deadline: 3600s late"' in fields
    assert f"trace_id={context.trace_id:032x}" in fields


def test_configure_logging_sets_the_root_format_and_keeps_messages_clean(capsys):
    from temporalio import activity

    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        configure_logging("json", logging.INFO)
        logging.getLogger("worker.test").info("hello", extra={"job": "invoice-reminders"})
        assert activity.logger.activity_info_on_message is False
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
        activity.logger.activity_info_on_message = True
    entry = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert entry["message"] == "hello" and entry["job"] == "invoice-reminders"


@pytest.mark.parametrize(
    ("value", "expected"), [(None, "text"), ("json", "json"), ("text", "text")]
)
def test_log_format_setting(monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv("LOG_FORMAT", raising=False)
    else:
        monkeypatch.setenv("LOG_FORMAT", value)
    assert Settings().log_format == expected


def test_metrics_port_is_off_unless_set(monkeypatch):
    monkeypatch.delenv("METRICS_PORT", raising=False)
    assert Settings().metrics_port is None
    monkeypatch.setenv("METRICS_PORT", "")
    assert Settings().metrics_port is None
    monkeypatch.setenv("METRICS_PORT", "9464")
    assert Settings().metrics_port == 9464


@pytest.mark.parametrize(
    ("env", "exporters"),
    [
        ({}, []),
        ({"OTEL_TRACES_EXPORTER": "none"}, []),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, ["OTLPSpanExporter"]),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, ["OTLPSpanExporter"]),
        (
            {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"},
            [],
        ),
        ({"OTEL_TRACES_EXPORTER": "console"}, ["ConsoleSpanExporter"]),
    ],
)
def test_spans_are_exported_only_when_the_otel_variables_say_so(env, exporters):
    assert [type(e).__name__ for e in span_exporters_from_env(env)] == exporters


def test_a_run_started_by_a_schedule_has_a_trace_id_derived_from_its_run():
    one = run_trace_id("invoice-reminders-2026-11-29T02:30:00Z", "run-1")
    assert one == run_trace_id("invoice-reminders-2026-11-29T02:30:00Z", "run-1")
    assert one != run_trace_id("invoice-reminders-2026-11-29T02:30:00Z", "run-2")
    assert len(one) == 32 and int(one, 16) != 0


@pytest.mark.parametrize(
    "env",
    [
        {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
        {"OTEL_TRACES_EXPORTER": "zipkin"},
    ],
)
def test_an_unsupported_exporter_is_a_settings_error(env):
    with pytest.raises(SettingsError, match="OTEL_"):
        span_exporters_from_env(env)


def _one_span(provider: TracerProvider, capture) -> tuple[trace.Span, bool, dict]:
    """A span under a run's trace, a line logged in it, and whether it was recorded."""
    logger, stream = capture(JsonFormatter())
    parent = trace.SpanContext(
        int(run_trace_id("nightly-reconcile-2026-11-29T02:30:00Z", "run-1"), 16),
        0x1234,
        is_remote=True,
        trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
    )
    context = trace.set_span_in_context(trace.NonRecordingSpan(parent))
    with provider.get_tracer("test").start_as_current_span("db.claim", context=context) as span:
        logger.info("execution claimed")
        recording = span.is_recording()
    return span, recording, json.loads(stream.getvalue())


def test_with_no_exporter_spans_are_not_recorded_yet_log_lines_carry_the_run_trace(
    capture, monkeypatch
):
    monkeypatch.delenv("OTEL_TRACES_SAMPLER", raising=False)
    span, recording, line = _one_span(tracer_provider([]), capture)
    assert not recording
    assert line["trace_id"] == run_trace_id("nightly-reconcile-2026-11-29T02:30:00Z", "run-1")
    assert line["span_id"] == format(span.get_span_context().span_id, "016x") != "0" * 16


def test_with_an_exporter_or_a_sampler_asked_for_spans_are_recorded(capture, monkeypatch):
    monkeypatch.delenv("OTEL_TRACES_SAMPLER", raising=False)
    exported = InMemorySpanExporter()
    provider = tracer_provider([exported])
    _, recording, line = _one_span(provider, capture)
    assert recording
    provider.force_flush()
    (recorded,) = exported.get_finished_spans()
    assert format(recorded.context.trace_id, "032x") == line["trace_id"]
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_on")
    asked = tracer_provider([])
    with asked.get_tracer("test").start_as_current_span("db.claim") as span:
        assert span.is_recording()
    # Workflows make spans only where spans are recorded (`worker.tracing`).
    assert records_spans(provider) and records_spans(asked)
    monkeypatch.delenv("OTEL_TRACES_SAMPLER")
    assert not records_spans(tracer_provider([]))
