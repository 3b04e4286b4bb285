"""What a job kind is, and how the engine turns each kind into what Temporal runs.

A job family's package (`jobs/<family>/`) declares its kinds as `JobKind` values: a name,
a typed params model, and what does one slot's work, either

- one activity: `activity` names the method of `owner` that does it all, or
- a workflow of steps: `workflow` is the kind's workflow class, run by `ScheduledJobWorkflow`
  as a child once the slot is claimed (`workflows/steps.py`), and `steps` names the methods
  of `owner` that are its steps and compensations (`activities/steps.py`).

The engine owns the rest: the catalog validates a job's `params` against the model before
anything reaches Temporal, and the worker registers each method as an activity that
validates the params again (a schedule written by an older catalog may carry stale ones) and
calls the method with them. No job repeats that plumbing.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.models import ExecutionRef, WorkInput, WorkResult
from activities.runtime import RuntimeKinds, SlotWork
from activities.steps import StepInput, step_activity
from core.queues import Queue

Work = Callable[[WorkInput, Any], Awaitable[WorkResult]]


@dataclass(frozen=True)
class JobKind:
    """A kind of job. `owner` is a class the worker builds with its connection pool; its
    method `activity` does one slot's work (taking the `WorkInput` and the params), or its
    methods `steps` are the steps of the kind's `workflow` (taking a `StepRun` and the
    params)."""

    name: str
    params: type[BaseModel]
    description: str
    owner: type
    activity: str | None = None
    workflow: type | None = None
    steps: tuple[str, ...] = ()
    # The owner is built as `owner(pool, settings)`, with the worker's settings, not
    # `owner(pool)`: for work that talks to peers outside Postgres (SMTP, HTTP APIs).
    settings: bool = False
    # A kind whose slot is light may name the owner's method that does one slot's work
    # inside a given transaction, `(conn, execution, params) -> counts`: runtime schedules
    # of this kind can then run in batches (`RuntimeKind.batch`, `activities.runtime`).
    slot_work: str | None = None
    # Which of the fleet's task queues the kind's runs use (`core.queues`).
    queue: Queue = "jobs"

    def __post_init__(self) -> None:
        if (self.activity is None) == (self.workflow is None):
            raise ValueError(f"job kind {self.name!r}: give exactly one of activity, workflow")
        if self.workflow is not None and not self.steps:
            raise ValueError(f"job kind {self.name!r}: a workflow kind names its steps")
        if self.activity is not None and self.steps:
            raise ValueError(f"job kind {self.name!r}: steps belong to a workflow kind")

    @property
    def workflow_name(self) -> str | None:
        """The Temporal workflow type of a workflow kind."""
        if self.workflow is None:
            return None
        return getattr(self.workflow, "__temporal_workflow_definition").name


@dataclass(frozen=True)
class RuntimeKind:
    """A job kind that runtime schedules (`schedules.tenants`) may name: the model their
    `params` are validated by, and whether it opts into batch mode (many light slots run
    by one activity). A job family declares its runtime kinds in `RUNTIME_KINDS`, beside
    its `KINDS` (the kind's work is a `JobKind` of the same name)."""

    name: str
    params_model: type[BaseModel]
    batch: bool = False
    description: str = ""

    @classmethod
    def of(cls, kind: JobKind, *, batch: bool = False) -> RuntimeKind:
        """The runtime kind whose slots `kind` works (its name, params and description);
        `batch`: they run many per activity, through `kind.slot_work`."""
        return cls(kind.name, kind.params, batch, kind.description)


def parse_params(kind: JobKind, work: WorkInput | StepInput) -> BaseModel:
    """The run's params as the kind's model; a permanent failure, naming the job, if invalid."""
    try:
        return kind.params.model_validate(work.params)
    except ValidationError as exc:
        problems = "; ".join(
            f"params.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise ApplicationError(
            f"{work.execution.job_name}: invalid params: {problems}",
            type="InvalidParams",
            non_retryable=True,
        ) from None


def work_activity(kind: JobKind, method: Work) -> Callable[[WorkInput], Awaitable[WorkResult]]:
    """The activity Temporal runs for `kind`: validate the params once, then do the work."""

    async def run(work: WorkInput) -> WorkResult:
        return await method(work, parse_params(kind, work))

    run.__name__ = run.__qualname__ = kind.activity
    run.__doc__ = method.__doc__
    return activity.defn(name=kind.activity)(run)


def build_runtime_kinds(
    kinds: Iterable[JobKind],
    runtime: Mapping[str, RuntimeKind],
    pool: Any,
    settings: Any = None,
) -> RuntimeKinds:
    """What runtime schedules' runs need of the runtime kinds (`runtime`, declared by the
    job families) whose work is one activity (a `JobKind` of the same name): its activity,
    and for those that run in batches, their in-transaction work (`JobKind.slot_work`)."""
    owners: dict[type, Any] = {}
    batch = {}
    single = [k for k in kinds if k.activity is not None and k.name in runtime]
    for kind in single:
        if not runtime[kind.name].batch:
            continue
        if kind.slot_work is None:
            raise ValueError(f"runtime kind {kind.name!r} runs in batches: give slot_work")
        if kind.owner not in owners:
            owners[kind.owner] = kind.owner(pool, settings) if kind.settings else kind.owner(pool)
        batch[kind.name] = _batch_work(kind, getattr(owners[kind.owner], kind.slot_work))
    return RuntimeKinds(
        {kind.name: kind.activity for kind in single if kind.activity},
        {kind.name: kind.params for kind in single},
        batch,
    )


def _batch_work(kind: JobKind, method: Callable) -> SlotWork:
    async def work(conn: Any, execution: ExecutionRef, params: Any) -> dict[str, int]:
        try:
            parsed = kind.params.model_validate(params or {})
        except ValidationError as exc:
            raise ValueError(f"{execution.job_name}: invalid params: {exc}") from None
        return await method(conn, execution, parsed)

    return work


def build_kind_activities(
    kinds: Iterable[JobKind], pool: Any, settings: Any = None
) -> list[Callable]:
    """Every kind's activities (its work, or its steps), one owner instance per class,
    bound to `pool` (and `settings`, for the kinds that take them). Raises `ValueError` if
    two kinds register one activity name."""
    owners: dict[type, Any] = {}
    found: dict[str, Callable] = {}

    def add(name: str, defined: Callable) -> None:
        if name in found:
            raise ValueError(f"activity {name!r} is registered by two job kinds")
        found[name] = defined

    for kind in kinds:
        if kind.owner not in owners:
            owners[kind.owner] = kind.owner(pool, settings) if kind.settings else kind.owner(pool)
        owner = owners[kind.owner]
        if kind.activity is not None:
            add(kind.activity, work_activity(kind, getattr(owner, kind.activity)))
        for step in kind.steps:
            add(
                step,
                step_activity(
                    step, pool, getattr(owner, step), functools.partial(parse_params, kind)
                ),
            )
    return list(found.values())
