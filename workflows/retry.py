"""The retry policy of a job's work, as the catalog sets it and workflow inputs carry it."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, Field
from temporalio.common import RetryPolicy


class RetrySettings(BaseModel):
    """Retry policy of a job's work activity (or of each step of a workflow job)."""

    initial_interval_seconds: float = Field(default=5.0, gt=0)
    backoff_coefficient: float = Field(default=2.0, ge=1)
    maximum_interval_seconds: float = Field(default=300.0, gt=0)
    maximum_attempts: int = Field(default=10, ge=0)  # 0: unlimited

    def policy(self) -> RetryPolicy:
        return RetryPolicy(
            initial_interval=timedelta(seconds=self.initial_interval_seconds),
            backoff_coefficient=self.backoff_coefficient,
            maximum_interval=timedelta(seconds=self.maximum_interval_seconds),
            maximum_attempts=self.maximum_attempts,
        )
