"""Workflow definitions only: deterministic, no I/O."""

from workflows.scheduled_job import JobRun, JobRunResult, RetrySettings, ScheduledJobWorkflow

__all__ = ["JobRun", "JobRunResult", "RetrySettings", "ScheduledJobWorkflow"]
