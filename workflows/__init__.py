"""Workflow definitions only: deterministic, no I/O."""

from workflows.models import JobRun, JobRunResult, RetrySettings, StepOptions, WorkflowJobInput
from workflows.scheduled_job import ScheduledJobWorkflow
from workflows.steps import JobSteps

__all__ = [
    "JobRun",
    "JobRunResult",
    "JobSteps",
    "RetrySettings",
    "ScheduledJobWorkflow",
    "StepOptions",
    "WorkflowJobInput",
]
