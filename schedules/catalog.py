"""The job catalog: every scheduled job, declared as a validated `JobSpec`."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from workflows import RetrySettings

_KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")

Overlap = Literal[
    "skip", "buffer_one", "buffer_all", "cancel_other", "terminate_other", "allow_all"
]


class JobSpec(BaseModel):
    """One scheduled job: when it runs, how Temporal treats it, and what it runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(description="kebab-case; also the schedule id and workflow id prefix")
    description: str = ""
    owner: str = ""
    cron: str
    timezone: str = Field(description="IANA time zone the cron is read in; required")
    overlap: Overlap = "skip"
    catchup_window: timedelta = timedelta(hours=1)
    jitter: timedelta = timedelta(0)
    activity: str = Field(description="name of the work activity the workflow runs")
    params: dict[str, Any] = Field(default_factory=dict)
    start_to_close: timedelta = timedelta(hours=1)
    heartbeat: timedelta | None = timedelta(minutes=1)
    starting_deadline: timedelta | None = None
    retry: RetrySettings = Field(default_factory=RetrySettings)
    paused: bool = False

    @field_validator("id")
    @classmethod
    def _kebab(cls, value: str) -> str:
        if not _KEBAB.match(value):
            raise ValueError(f"must be kebab-case (e.g. invoice-reminders), got {value!r}")
        return value

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str) -> str:
        if not croniter.is_valid(value):
            raise ValueError(f"is not a valid cron expression: {value!r}")
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"is not a known IANA time zone: {value!r}") from None
        return value

    @field_validator("catchup_window")
    @classmethod
    def _window(cls, value: timedelta) -> timedelta:
        if value < timedelta(seconds=10):
            raise ValueError("must be at least 10 seconds (Temporal's minimum)")
        return value

    @model_validator(mode="after")
    def _heartbeat_within_timeout(self) -> JobSpec:
        if self.heartbeat is not None and self.heartbeat > self.start_to_close:
            raise ValueError("heartbeat must not exceed start_to_close")
        return self


INVOICE_REMINDERS = JobSpec(
    id="invoice-reminders",
    description="Remind customers of unpaid invoices past due, at most once a week each.",
    owner="billing",
    cron="30 2 * * *",
    timezone="Europe/London",
    catchup_window=timedelta(hours=6),
    activity="send_invoice_reminders",
    params={"chunk_size": 5000, "remind_every_days": 7},
    start_to_close=timedelta(hours=2),
    heartbeat=timedelta(minutes=1),
)

CATALOG: tuple[JobSpec, ...] = (INVOICE_REMINDERS,)
