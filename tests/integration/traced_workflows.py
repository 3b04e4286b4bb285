"""Workflows for the tracing tests: a run whose activity, local activity and child
workflow's activity each say which trace they ran in. Sandboxed as the fleet's are."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from opentelemetry import trace

_TIMEOUT = timedelta(seconds=30)


@activity.defn
async def trace_of() -> str:
    """The trace id (32 hex digits) of the span this activity runs under."""
    return format(trace.get_current_span().get_span_context().trace_id, "032x")


@workflow.defn
class TracedChild:
    @workflow.run
    async def run(self) -> str:
        return await workflow.execute_activity(trace_of, start_to_close_timeout=_TIMEOUT)


@workflow.defn
class TracedRun:
    @workflow.run
    async def run(self) -> list[str]:
        own = await workflow.execute_activity(trace_of, start_to_close_timeout=_TIMEOUT)
        local = await workflow.execute_local_activity(trace_of, start_to_close_timeout=_TIMEOUT)
        child = await workflow.execute_child_workflow(
            TracedChild.run, id=f"{workflow.info().workflow_id}-child"
        )
        return [own, local, child]
