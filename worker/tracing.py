"""Temporal's `TracingInterceptor`, made to give a schedule-started run one trace.

A workflow started by a client carries the client's trace context in a header, and every
span of the run joins that trace. A workflow started by a Temporal schedule has no header:
with `always_create_workflow_spans=True` the stock interceptor still makes spans, but each
one (`RunWorkflow`, every `StartActivity`, `CompleteWorkflow`) starts a trace of its own,
so a run is scattered over several traces.

Here a run without a header gets a trace context derived from its workflow id and run id:
the same on every worker and every replay, so the run is one trace even when it moves
between workers. Its spans hang under a virtual parent span (that span id is never
exported), and its trace id can be recomputed from the run id (`run_trace_id`).

A worker whose spans are not recorded (no exporter: `worker.telemetry`) makes no workflow
spans (`workflow_spans=False`): each run's `RunWorkflow`, `StartActivity` and
`CompleteWorkflow` would be made, given ids and thrown away, in the thread that runs the
workflow, and its context serialized into a header on every activity, for nothing that
anyone reads. The run keeps its trace all the same (`_RunContextInbound`): its activities
derive the run's context from their workflow and run ids when no header carries one
(`RunTracingInterceptor._context_from_headers`), so their spans, and the log lines made
under them, carry the run's trace id; a header the run was started with goes on to its
activities as it came, and a child workflow or a continued run gets the run's context in
its header, so it stays in the run's trace.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, NoReturn

from opentelemetry import context as otel_context
from opentelemetry import trace
from temporalio import activity, workflow
from temporalio.api.common.v1 import Payload
from temporalio.contrib.opentelemetry import TracingInterceptor, TracingWorkflowInboundInterceptor

# The SDK's own attach/detach for workflow code (it tolerates a detach in another
# contextvars context, which an evicted workflow's cleanup runs in), and the propagator its
# interceptors read and write a header's context with (trace context and baggage).
from temporalio.contrib.opentelemetry._context import attached_context
from temporalio.contrib.opentelemetry._interceptor import default_text_map_propagator
from temporalio.converter import PayloadConverter
from temporalio.worker import (
    ContinueAsNewInput,
    ExecuteWorkflowInput,
    HandleSignalInput,
    HandleUpdateInput,
    StartActivityInput,
    StartChildWorkflowInput,
    StartLocalActivityInput,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)

# Where TracingInterceptor carries a context (its `header_key`).
HEADER_KEY = "_tracer-data"


def run_trace_context(workflow_id: str, run_id: str) -> tuple[int, int]:
    """The (trace id, virtual parent span id) of a run started without trace context."""
    digest = hashlib.sha256(f"{workflow_id}\0{run_id}".encode()).digest()
    return int.from_bytes(digest[:16], "big") or 1, int.from_bytes(digest[16:24], "big") or 1


def run_trace_id(workflow_id: str, run_id: str) -> str:
    """The trace id (32 hex digits) of a schedule-started run, as the logs show it."""
    return format(run_trace_context(workflow_id, run_id)[0], "032x")


def run_traceparent(workflow_id: str, run_id: str) -> dict[str, str]:
    """A run's derived context as a W3C carrier, sampled: its spans follow this virtual
    parent."""
    trace_id, span_id = run_trace_context(workflow_id, run_id)
    return {"traceparent": f"00-{trace_id:032x}-{span_id:016x}-01"}


def run_context(workflow_id: str, run_id: str) -> otel_context.Context:
    """The OpenTelemetry context of a run started without one: its virtual parent span."""
    trace_id, span_id = run_trace_context(workflow_id, run_id)
    parent = trace.SpanContext(
        trace_id, span_id, is_remote=True, trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED)
    )
    return trace.set_span_in_context(trace.NonRecordingSpan(parent))


class _RunTracingInbound(TracingWorkflowInboundInterceptor):
    """Falls back to the run's derived trace context when the start carried none."""

    def _load_workflow_context_carrier(self):
        carrier = super()._load_workflow_context_carrier()
        if carrier is None:
            info = workflow.info()
            carrier = run_traceparent(info.workflow_id, info.run_id)
            self._workflow_context_carrier = carrier
        return carrier


class _RunContextInbound(WorkflowInboundInterceptor):
    """A run's trace context without workflow spans (`workflow_spans=False`): its code runs
    under the context it was started with, or the one derived from the run, and what it
    starts carries that context on, as far as anyone can read it (module docstring)."""

    def __init__(self, next: WorkflowInboundInterceptor) -> None:
        super().__init__(next)
        self._header: Payload | None = None  # the context to pass on (`context_header`)

    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        super().init(_RunContextOutbound(outbound, self))

    def _started_with(self) -> Payload | None:
        """The context header the run was started with, if any."""
        return workflow.info().headers.get(HEADER_KEY) or None

    def _context(self) -> otel_context.Context:
        header = self._started_with()
        if header is None:
            info = workflow.info()
            return run_context(info.workflow_id, info.run_id)
        carrier = PayloadConverter.default.from_payloads([header])[0]
        return default_text_map_propagator.extract(carrier)

    def context_header(self) -> Payload:
        """The run's context for a child workflow or a continued run: the header it was
        started with, or its derived context (the child derives a trace of its own without)."""
        if self._header is None:
            info = workflow.info()
            derived = run_traceparent(info.workflow_id, info.run_id)
            self._header = (
                self._started_with() or PayloadConverter.default.to_payloads([derived])[0]
            )
        return self._header

    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        with attached_context(self._context()):
            return await super().execute_workflow(input)

    async def handle_signal(self, input: HandleSignalInput) -> None:
        with attached_context(self._context()):
            await super().handle_signal(input)

    async def handle_update_handler(self, input: HandleUpdateInput) -> Any:
        with attached_context(self._context()):
            return await super().handle_update_handler(input)


class _RunContextOutbound(WorkflowOutboundInterceptor):
    """Activities get the header the run was started with, if it had one (else they derive
    the run's context themselves: no header to write, store and send); child workflows and
    continued runs get the run's context."""

    def __init__(self, next: WorkflowOutboundInterceptor, root: _RunContextInbound) -> None:
        super().__init__(next)
        self._root = root

    def _for_activity(self, headers: Mapping[str, Payload]) -> Mapping[str, Payload]:
        header = self._root._started_with()
        return headers if header is None else {**headers, HEADER_KEY: header}

    def start_activity(self, input: StartActivityInput) -> workflow.ActivityHandle:
        input.headers = self._for_activity(input.headers)
        return super().start_activity(input)

    def start_local_activity(self, input: StartLocalActivityInput) -> workflow.ActivityHandle:
        input.headers = self._for_activity(input.headers)
        return super().start_local_activity(input)

    async def start_child_workflow(
        self, input: StartChildWorkflowInput
    ) -> workflow.ChildWorkflowHandle:
        input.headers = {**input.headers, HEADER_KEY: self._root.context_header()}
        return await super().start_child_workflow(input)

    def continue_as_new(self, input: ContinueAsNewInput) -> NoReturn:
        input.headers = {**input.headers, HEADER_KEY: self._root.context_header()}
        super().continue_as_new(input)


class RunTracingInterceptor(TracingInterceptor):
    """`TracingInterceptor` whose schedule-started runs are one trace each.

    `workflow_spans=False`: workflows make no spans, only carry the run's context (for a
    worker whose spans are not recorded, `worker.telemetry`). Register it on the client
    only: workers built on that client inherit it.
    """

    def __init__(self, workflow_spans: bool = True) -> None:
        super().__init__(always_create_workflow_spans=True)
        self.workflow_spans = workflow_spans

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor]:
        if not self.workflow_spans:
            return _RunContextInbound
        super().workflow_interceptor_class(input)  # registers the span extern function
        return _RunTracingInbound

    def _context_from_headers(self, headers: Mapping[str, Payload]) -> otel_context.Context | None:
        """An activity's parent context: from its header, else its run's derived one (a run
        whose workflow made no spans passes none on)."""
        context = super()._context_from_headers(headers)
        if context is None and activity.in_activity():
            info = activity.info()
            if info.workflow_id and info.workflow_run_id:
                return run_context(info.workflow_id, info.workflow_run_id)
        return context
