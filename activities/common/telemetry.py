"""Spans around the Postgres units of work and the per-job metrics, recorded where a run's
execution row changes state.

Instruments come from the global OpenTelemetry providers, which only the worker's entry point
configures (`worker/telemetry.py`). Until then, or when telemetry is off, every call here
goes to the API's no-op implementation and costs next to nothing. Spans and metrics carry
ids, times and counts, never customer data. The exported names are `core/metric_names.py`.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypeVar

from opentelemetry import metrics, trace
from temporalio.exceptions import ApplicationError

from activities.common.models import STALE_ATTEMPT, ExecutionRef
from core import metric_names

RunStatus = Literal[
    "completed", "failed", "compensated", "skipped", "already_completed", "superseded"
]
SkipReason = Literal["starting_deadline", "catchup_policy", "repeated_local_time", "future_slot"]

_tracer = trace.get_tracer("scheduled_jobs.activities")
_meter = metrics.get_meter("scheduled_jobs")

# Runs last from seconds to hours; lateness from a second (normal) to days (a backfill).
_DURATION_BUCKETS = [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400]
_LATENESS_BUCKETS = [0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 21600, 86400, 604800]

_runs = _meter.create_counter(
    metric_names.RUNS, description="Finished runs of a scheduled job, by outcome."
)
_duration = _meter.create_histogram(
    metric_names.DURATION,
    unit="s",
    description="How long a completed run took, from its claim to its completion.",
    explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
)
_lateness = _meter.create_histogram(
    metric_names.LATENESS,
    unit="s",
    description="When a run started (its claim) minus its scheduled time.",
    explicit_bucket_boundaries_advisory=_LATENESS_BUCKETS,
)
_skips = _meter.create_counter(
    metric_names.SKIPS, description="Runs recorded as skipped, by reason."
)
_catchup_gaps = _meter.create_counter(
    metric_names.CATCHUP_GAPS,
    description="Missed fire times dropped because they exceeded the job's catch-up cap.",
)

A = TypeVar("A")
R = TypeVar("R")

# Runtime schedules (issue 21) are many and named by their customers: their runs' metrics
# are labelled by kind (`runtime:weekly-report`), never by schedule or tenant.
_RUNTIME_PREFIX = "rt-"
_runtime_kind: ContextVar[str | None] = ContextVar("runtime_kind", default=None)


@contextmanager
def runtime_kind(kind: str) -> Iterator[None]:
    """Label the metrics recorded inside with `kind`, for a runtime schedule's slot."""
    token = _runtime_kind.set(kind)
    try:
        yield
    finally:
        _runtime_kind.reset(token)


def job_label(job: str) -> str:
    """The `job` label of a metric: the catalog job's id, or a runtime slot's kind."""
    if job.startswith(_RUNTIME_PREFIX):
        return f"runtime:{_runtime_kind.get() or 'unknown'}"
    return job


def _span_attributes(model: Any) -> dict[str, Any]:
    """`job`, `scheduled_at` and `execution_id` from an activity input, where it has them."""
    source = getattr(model, "execution", model)
    attributes: dict[str, Any] = {"db.system": "postgresql"}
    if (job := getattr(source, "job_name", None)) is not None:
        attributes["job"] = job
    if isinstance(scheduled_at := getattr(source, "scheduled_at", None), datetime):
        attributes["scheduled_at"] = scheduled_at.isoformat()
    if (execution_id := getattr(source, "execution_id", None)) is not None:
        attributes["execution_id"] = execution_id
    return attributes


def traced(
    name: str,
) -> Callable[[Callable[[Any, A], Awaitable[R]]], Callable[[Any, A], Awaitable[R]]]:
    """Run an activity method inside a span `name`, labelled from its input model.

    Put it under `@activity.defn`: the SDK reads the wrapped method's signature.
    """

    def decorate(method: Callable[[Any, A], Awaitable[R]]) -> Callable[[Any, A], Awaitable[R]]:
        @functools.wraps(method)
        async def wrapper(self: Any, arg: A) -> R:
            with db_span(name, arg):
                return await method(self, arg)

        return wrapper

    return decorate


@contextmanager
def db_span(name: str, model: Any) -> Iterator[trace.Span]:
    """A span `name` around a unit of Postgres work, labelled from `model` (input or ref)."""
    with _tracer.start_as_current_span(
        name, kind=trace.SpanKind.CLIENT, attributes=_span_attributes(model)
    ) as span:
        yield span


@contextmanager
def fenced_span(fence: Any, execution: ExecutionRef | None = None) -> Iterator[None]:
    """A span around one fenced transaction; a stale attempt is counted `superseded`."""
    attributes = _span_attributes(execution) | {
        "execution_id": fence.execution_id,
        "attempt": fence.token,
    }
    with _tracer.start_as_current_span(
        "db.fenced_transaction", kind=trace.SpanKind.CLIENT, attributes=attributes
    ):
        try:
            yield
        except ApplicationError as exc:
            if exc.type == STALE_ATTEMPT and execution is not None:
                record_run(execution.job_name, "superseded")
            raise


def record_run(job: str, status: RunStatus) -> None:
    """Count one finished run of `job`."""
    _runs.add(1, {"job": job_label(job), "status": status})


def record_claim(job: str, execution_id: int, lateness_seconds: float, skipped: bool) -> None:
    """A run of `job` started (claimed or reclaimed its slot) `lateness_seconds` late.

    `skipped`: it started past its starting deadline and was recorded skipped instead.
    """
    trace.get_current_span().set_attribute("execution_id", execution_id)
    _lateness.record(max(lateness_seconds, 0.0), {"job": job_label(job)})
    if skipped:
        record_skip(job, "starting_deadline")


def record_skip(job: str, reason: SkipReason) -> None:
    """A run of `job` was recorded skipped for `reason`: counted as a skip and a run."""
    _skips.add(1, {"job": job_label(job), "reason": reason})
    record_run(job, "skipped")


def record_duplicate(job: str, execution_id: int, status: str) -> None:
    """A run found its slot already settled (`completed` or `skipped`) and did nothing."""
    trace.get_current_span().set_attribute("execution_id", execution_id)
    record_run(job, "already_completed" if status == "completed" else "skipped")


def record_completed(job: str, duration_seconds: float) -> None:
    """A run of `job` completed, `duration_seconds` after its claim."""
    record_run(job, "completed")
    _duration.record(duration_seconds, {"job": job_label(job)})


def record_failed(job: str | None) -> None:
    """A run of `job` was marked failed (None: another run held the slot; not counted)."""
    if job is not None:
        trace.get_current_span().set_attribute("job", job)
        record_run(job, "failed")


def record_catchup_gap(job: str, missed_count: int) -> None:
    """`missed_count` missed fire times of `job` were dropped: more than its catch-up cap."""
    if missed_count > 0:
        _catchup_gaps.add(missed_count, {"job": job_label(job)})


@dataclass(frozen=True)
class Happened:
    """What a transaction of a run did that the metrics count, as its logic returns it
    (`activities.catchup.missed.happened_in`, `activities.claim.executions.claim_happened`,
    a work's result), joined with `+` and recorded once, after the commit (`record`): the
    logic makes no call into telemetry between its steps, and a transaction that rolled
    back counts nothing."""

    job: str
    skips: tuple[SkipReason, ...] = ()  # each slot recorded skipped, by reason
    catchup_gap: int | None = None  # missed fire times dropped past the catch-up cap
    claim: tuple[int, float, bool] | None = None  # execution id, lateness (s), skipped
    duplicate: tuple[int, str] | None = None  # execution id, status: the slot was settled
    already_completed: bool = False  # the slot was found completed by an earlier attempt
    duration: float | None = None  # the run's, when this transaction completed its slot

    def __add__(self, other: Happened) -> Happened:
        return Happened(
            self.job,
            (*self.skips, *other.skips),
            self.catchup_gap if other.catchup_gap is None else other.catchup_gap,
            other.claim or self.claim,
            other.duplicate or self.duplicate,
            self.already_completed or other.already_completed,
            self.duration if other.duration is None else other.duration,
        )

    def record(self) -> None:
        for reason in self.skips:
            record_skip(self.job, reason)
        if self.catchup_gap is not None:
            record_catchup_gap(self.job, self.catchup_gap)
        if self.claim is not None:
            record_claim(self.job, *self.claim)
        if self.duplicate is not None:
            record_duplicate(self.job, *self.duplicate)
        if self.already_completed:
            record_run(self.job, "already_completed")
        if self.duration is not None:
            record_completed(self.job, self.duration)
