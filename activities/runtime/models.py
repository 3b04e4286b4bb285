"""Names and payloads of runtime schedules' runs (issue 21), shared by the dispatcher, the
run workflows and their activities.

A runtime schedule (a row of `runtime_schedules`, created by an application at runtime)
runs each slot under the same ledger row as a catalog job's: `job_executions.job_name` is
`rt-<schedule id>`, and a slot run on its own has the workflow id `rt-<id>-<slot, UTC>Z`,
the shape Temporal gives a catalog job's runs. Only ids and times travel through workflow
history; the schedule's kind and params are read from PostgreSQL when the run begins.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field
from temporalio.common import SearchAttributeKey

from activities.common.dependency_models import Dependency
from activities.common.models import Origin, SlotOutcome
from core.ids import stamp
from timing import Timing
from timing.business import CalendarRule

LEDGER_PREFIX = "rt-"
BATCH_PREFIX = "rt-batch-"
BATCH_SLOTS = 1000  # slots per batch workflow (kinds that run in batches): 2 activity calls

# Keyword search attributes of every runtime run, so the Temporal UI filters one
# customer's runs (registered by `schedules sync`, like the catalog's own attributes).
TENANT_ATTRIBUTE = SearchAttributeKey.for_keyword("ScheduledJobsTenant")
SCHEDULE_ATTRIBUTE = SearchAttributeKey.for_keyword("ScheduledJobsSchedule")
KIND_ATTRIBUTE = SearchAttributeKey.for_keyword("ScheduledJobsKind")
RUNTIME_ATTRIBUTES = (TENANT_ATTRIBUTE, SCHEDULE_ATTRIBUTE, KIND_ATTRIBUTE)


def ledger_name(schedule_id: int) -> str:
    """The `job_executions.job_name` of a runtime schedule's slots."""
    return f"{LEDGER_PREFIX}{schedule_id}"


def schedule_id_of(job_name: str) -> int | None:
    """The runtime schedule a ledger name belongs to (None: a catalog job's)."""
    rest = job_name.removeprefix(LEDGER_PREFIX)
    return int(rest) if rest != job_name and rest.isdigit() else None


def slot_workflow_id(schedule_id: int, slot: datetime) -> str:
    """The workflow id of one slot run on its own: `rt-<id>-<slot UTC>Z`."""
    return f"{ledger_name(schedule_id)}-{stamp(slot)}"


def batch_workflow_id(first_id: int, first_slot: datetime) -> str:
    """The workflow id of a batch, named after its first intent (schedule, slot): unique,
    since an intent is decided once and belongs to one batch."""
    return f"{BATCH_PREFIX}{first_id}-{stamp(first_slot)}"


@dataclass(frozen=True)
class ScheduleRow:
    """A `runtime_schedules` row as the engine's queries read it: by column name
    (`psycopg.rows.class_row(ScheduleRow)`), never by position; a column a query does not
    select keeps its default."""

    id: int
    cron: str
    timezone: str
    start_at: datetime | None = None
    end_at: datetime | None = None
    tenant: str = ""
    name: str = ""
    kind: str = ""
    params: dict[str, Any] | None = None
    deleted_at: datetime | None = None
    depends_on: list[Any] | None = None
    timing_since: datetime | None = None
    calendar_definition: str | None = None  # the business calendar, as JSON text
    on_holiday: str | None = None
    due_at: datetime | None = None  # a slot's, read with it: when its calendar moved it

    def timing(self, calendar: CalendarRule | None = None) -> Timing:
        """When the schedule fires: its cron in its zone, between its bounds."""
        return Timing(
            cron=self.cron,
            timezone=self.timezone,
            start_at=self.start_at,
            end_at=self.end_at,
            calendar=calendar,
        )


class RuntimeRun(BaseModel):
    """The input of `RuntimeRunWorkflow`: one slot of one runtime schedule."""

    schedule_id: int
    scheduled_at: datetime
    origin: Origin = "scheduled"


class RuntimeBegin(BaseModel):
    """`begin_runtime_run`'s input: the slot, and who claims it."""

    run: RuntimeRun
    workflow_id: str
    run_id: str
    server_now: datetime  # the workflow's clock, for the future-slot check


class RuntimeWork(BaseModel):
    """How the kind's work activity runs, decided by the kind (`activities.run.kinds.JobKind`)."""

    activity: str
    params: dict = Field(default_factory=dict)
    # The schedule's cron, zone and bounds (`ScheduleRow.timing`). A begin recorded by an
    # earlier release holds the same fields as a plain object: it reads as this `Timing`.
    timing: Timing | None = None
    # The kind's (`activities.run.kinds.RuntimeKind`, set by `begin_runtime_run`); the defaults
    # are what a begin of an earlier release recorded without them.
    start_to_close_seconds: float = 600.0
    heartbeat_seconds: float | None = None
    maximum_attempts: int = 10
    # The upstream slots the slot waits for before its work (docs/dependencies.md), and
    # the tenant whose schedules they name.
    depends_on: list[Dependency] = Field(default_factory=list)
    tenant: str | None = None


class RuntimeBegun(BaseModel):
    """What the start of a runtime run settled: the claim, and the work to do (None when
    the slot is settled or its schedule is gone)."""

    execution_id: int | None = None
    outcome: Literal["claimed", "completed", "skipped"] = "skipped"
    reason: str | None = None
    job_name: str
    work: RuntimeWork | None = None


class RuntimeRunResult(SlotOutcome):
    """What a runtime run did: ids and counts only."""

    schedule_id: int


class BatchRun(BaseModel):
    """The input of `RuntimeBatchWorkflow`: its slots are the intents that name it."""

    batch_id: str


class BatchInput(BaseModel):
    batch_id: str
    after: int = 0  # slots of the batch already handled by earlier activities


class BatchResult(BaseModel):
    handled: int = 0  # slots looked at, in order
    completed: int = 0
    already: int = 0  # settled before (another run, an earlier attempt)
    skipped: int = 0
    failed: int = 0
    done: bool = True  # False: more slots remain after `handled`
