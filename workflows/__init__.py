"""Workflow definitions only: deterministic, no I/O."""

from workflows.retry import RetrySettings
from workflows.scheduled_job import JobRun, JobRunResult, ScheduledJobWorkflow
from workflows.steps import JobSteps, StepOptions, WorkflowJobInput

__all__ = [
    "JobRun",
    "JobRunResult",
    "JobSteps",
    "RetrySettings",
    "ScheduledJobWorkflow",
    "StepOptions",
    "WorkflowJobInput",
]
