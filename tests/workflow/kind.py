"""A workflow kind of three steps, as a job family writes one (`jobs/monthly_billing`), on
the stand-in step activities: open a batch (compensated by closing it), process it in two
calls, publish it."""

from __future__ import annotations

from temporalio import workflow

from workflows.models import WorkflowJobInput
from workflows.steps import JobSteps

with workflow.unsafe.imports_passed_through():
    from activities.common.models import WorkResult
    from tests.workflow.stand_ins import StandIns


@workflow.defn
class BatchStepsWorkflow:
    @workflow.run
    async def run(self, job: WorkflowJobInput) -> WorkResult:
        async with JobSteps(job, total=3) as steps:
            opened = await steps.run(StandIns.open_batch, compensate=StandIns.close_batch)
            await steps.run(StandIns.process, inputs=opened.output)
            await steps.run(StandIns.publish, inputs=opened.output)
        return steps.result
