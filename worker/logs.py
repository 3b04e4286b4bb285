"""Process logging: one line per record, as text or JSON, with the run's fields and trace ids.

Activity and workflow code logs through `activity.logger` / `workflow.logger` with
`extra={"job": ..., "scheduled_at": ...}`; the Temporal SDK adds the workflow id, activity
type and attempt. This module turns those into fields (text: `key=value` after the
message; JSON: top-level keys) and adds the current OpenTelemetry `trace_id` and `span_id`,
so a log line leads to its trace. Configured by the entry points only, never at import.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from opentelemetry import trace
from temporalio import activity, workflow

from core import redact

LogFormat = Literal["text", "json"]

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}
# The SDK's context dicts, flattened into fields (the explicit `extra=` fields win).
_TEMPORAL_CONTEXT = {
    "temporal_activity": {
        "workflow_id": "workflow_id",
        "workflow_run_id": "workflow_run_id",
        "activity_type": "activity_type",
        "activity_id": "activity_id",
        "attempt": "attempt",
    },
    "temporal_workflow": {
        "workflow_id": "workflow_id",
        "run_id": "workflow_run_id",
        "workflow_type": "workflow_type",
        "attempt": "attempt",
    },
}
# Fields shown first in text lines, in this order; others follow alphabetically.
_FIRST = ("job", "scheduled_at", "execution_id", "attempt", "workflow_id")
# Third-party loggers that write secrets at INFO or DEBUG: httpx and httpcore log every
# request line (a webhook URL with its token), aiosmtplib every SMTP command (the AUTH
# line). Kept at WARNING whatever the process's level; their records are scrubbed too.
QUIET_LOGGERS = ("httpx", "httpcore", "aiosmtplib", "hpack", "urllib3")


class TraceContextFilter(logging.Filter):
    """Put the current span's `trace_id` and `span_id` (hex) on every record, if any."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            record.trace_id = format(context.trace_id, "032x")
            record.span_id = format(context.span_id, "016x")
        return True


class RedactingFilter(logging.Filter):
    """Scrub secrets (`core.redact`) from every record before a handler writes it: the
    message, string fields and the exception text. Records of every logger pass through
    the root handler, third-party ones included."""

    _formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact.scrub(message)
        if clean != message or record.args:
            record.msg, record.args = clean, None
        for key, value in list(vars(record).items()):
            if key not in _STANDARD and isinstance(value, str):
                setattr(record, key, redact.scrub(value))
        if record.exc_info:
            record.exc_text = redact.scrub(self._formatter.formatException(record.exc_info))
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = redact.scrub(record.exc_text)
        return True


def quiet_libraries() -> None:
    """Keep the loggers of `QUIET_LOGGERS` at WARNING (see there)."""
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def record_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The structured fields of `record`: its `extra=` values, SDK context flattened."""
    fields: dict[str, Any] = {}
    for key, names in _TEMPORAL_CONTEXT.items():
        details = getattr(record, key, None)
        if isinstance(details, Mapping):
            for source, target in names.items():
                if details.get(source) is not None:
                    fields[target] = details[source]
    for key, value in vars(record).items():
        if key not in _STANDARD and key not in _TEMPORAL_CONTEXT and not key.startswith("_"):
            fields[key] = value
    return fields


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    return str(value)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, then the record's fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record_fields(record).items():
            entry.setdefault(key, _jsonable(value))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """`time level logger message key=value ...`: the fields after the message, greppable."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        fields = record_fields(record)
        ordered = [k for k in _FIRST if k in fields] + sorted(k for k in fields if k not in _FIRST)
        if not ordered:
            return line
        pairs = " ".join(f"{key}={_text(fields[key])}" for key in ordered)
        return f"{line} {pairs}"


def _text(value: Any) -> str:
    text = value.isoformat() if isinstance(value, datetime) else str(value)
    return json.dumps(text) if not text or any(c in text for c in ' "=\n') else text


def configure_logging(log_format: LogFormat = "text", level: int = logging.INFO) -> None:
    """Send every logger's records to stderr in `log_format`, with trace ids.

    Replaces the root logger's handlers, so it may be called again (tests do). The SDK's
    context (workflow id, activity type, attempt) goes into the fields, not the message.
    Secrets are scrubbed from every record and the chatty libraries kept at WARNING.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    handler.addFilter(TraceContextFilter())
    handler.addFilter(RedactingFilter())
    quiet_libraries()
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    activity.logger.activity_info_on_message = False
    workflow.logger.workflow_info_on_message = False
