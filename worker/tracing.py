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
"""

from __future__ import annotations

import hashlib

from temporalio import workflow
from temporalio.contrib.opentelemetry import TracingInterceptor, TracingWorkflowInboundInterceptor
from temporalio.worker import WorkflowInterceptorClassInput


def run_trace_context(workflow_id: str, run_id: str) -> tuple[int, int]:
    """The (trace id, virtual parent span id) of a run started without trace context."""
    digest = hashlib.sha256(f"{workflow_id}\0{run_id}".encode()).digest()
    return int.from_bytes(digest[:16], "big") or 1, int.from_bytes(digest[16:24], "big") or 1


def run_trace_id(workflow_id: str, run_id: str) -> str:
    """The trace id (32 hex digits) of a schedule-started run, as the logs show it."""
    return format(run_trace_context(workflow_id, run_id)[0], "032x")


class _RunTracingInbound(TracingWorkflowInboundInterceptor):
    """Falls back to the run's derived trace context when the start carried none."""

    def _load_workflow_context_carrier(self):
        carrier = super()._load_workflow_context_carrier()
        if carrier is None:
            info = workflow.info()
            trace_id, span_id = run_trace_context(info.workflow_id, info.run_id)
            # W3C trace context, sampled: the run's spans follow this virtual parent.
            carrier = {"traceparent": f"00-{trace_id:032x}-{span_id:016x}-01"}
            self._workflow_context_carrier = carrier
        return carrier


class RunTracingInterceptor(TracingInterceptor):
    """`TracingInterceptor` whose schedule-started runs are one trace each.

    Register it on the client only: workers built on that client inherit it.
    """

    def __init__(self) -> None:
        super().__init__(always_create_workflow_spans=True)

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[TracingWorkflowInboundInterceptor]:
        super().workflow_interceptor_class(input)  # registers the span extern function
        return _RunTracingInbound
