"""Workflow definitions only: deterministic, no I/O.

The names below are imported on first use: Temporal's sandbox imports a workflow's module
afresh for every workflow run, its package's `__init__` included, so importing
`workflows.scheduled_job` must not import every other workflow module too (a run of
`ScheduledJobWorkflow` then re-imports only what it uses; a run of
`LocalTransactionJobWorkflow` imports `workflows.local_transaction`, not `scheduled_job`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from workflows.models import JobRun, JobRunResult, RetrySettings, StepOptions, WorkflowJobInput

if TYPE_CHECKING:
    from workflows.chunked import ChunkedJobWorkflow
    from workflows.local_transaction import LocalTransactionJobWorkflow
    from workflows.one_transaction import OneTransactionJobWorkflow
    from workflows.scheduled_job import ScheduledJobWorkflow, workflow_for
    from workflows.steps import JobSteps

_LAZY = {
    "ChunkedJobWorkflow": "workflows.chunked",
    "ScheduledJobWorkflow": "workflows.scheduled_job",
    "OneTransactionJobWorkflow": "workflows.one_transaction",
    "LocalTransactionJobWorkflow": "workflows.local_transaction",
    "workflow_for": "workflows.scheduled_job",
    "JobSteps": "workflows.steps",
}

__all__ = [
    "ChunkedJobWorkflow",
    "JobRun",
    "JobRunResult",
    "JobSteps",
    "LocalTransactionJobWorkflow",
    "OneTransactionJobWorkflow",
    "RetrySettings",
    "ScheduledJobWorkflow",
    "StepOptions",
    "WorkflowJobInput",
    "workflow_for",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
