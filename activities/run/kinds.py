"""What a job kind is, and how the engine turns each kind into what Temporal runs.

A job family's package (`jobs/<family>/`) declares its kinds as `JobKind` values: a name,
a typed params model, and what does one slot's work, either

- one activity: `activity` names the method of `owner` that does it all, or
- a workflow of steps: `workflow` is the kind's workflow class, run by `ScheduledJobWorkflow`
  as a child once the slot is claimed (`workflows/steps.py`), and `steps` names the methods
  of `owner` that are its steps and compensations (`activities/steps/record.py`).

The engine owns the rest: the catalog validates a job's `params` against the model before
anything reaches Temporal, and the worker registers each method as an activity that
validates the params again (a schedule written by an older catalog may carry stale ones) and
calls the method with them. No job repeats that plumbing.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, get_type_hints

from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.chunks.chunked import works_in_chunks
from activities.claim.heartbeat import heartbeating
from activities.common.lifetime import RUNTIME_RETRY_INTERVAL, RUNTIME_WORK_LIMIT, work_bound
from activities.common.models import ExecutionRef, WorkInput, WorkResult
from activities.run.begin import BegunWork, WorkOrBegin, begin_and_work
from activities.runtime.models import schedule_id_of
from activities.runtime.ownership import OwnershipCheck, refuse_foreign_slot
from activities.runtime.runs import RuntimeKinds, SlotWork, run_slot
from activities.steps.record import StepInput, step_activity
from core.queues import Queue

Work = Callable[[WorkInput, Any], Awaitable[WorkResult]]


class PoolActivities:
    """A job kind's activities (its `owner`), built by the worker with its connection pool
    (tests build them with a test pool)."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self.pool = pool


@dataclass(frozen=True)
class JobKind:
    """A kind of job. `owner` is a class the worker builds with its connection pool; its
    method `activity` does one slot's work (taking the `WorkInput` and the params), or its
    methods `steps` are the steps of the kind's `workflow` (taking a `StepRun` and the
    params). A package declares one in a line: `JobKind("card-settlement",
    SettlementActivities, activity="settle_card_payments")`; the rest is read from the work
    itself."""

    name: str
    owner: type
    activity: str | None = None
    workflow: type | None = None
    steps: tuple[str, ...] = ()
    # The owner is built as `owner(pool, settings)`, with the worker's settings, not
    # `owner(pool)`: for work that talks to peers outside Postgres (SMTP, HTTP APIs).
    settings: bool = False
    # A kind whose slot is light may name the owner's method that does one slot's work
    # inside a given transaction, `(conn, execution, params) -> counts`: a run of it then
    # plans, claims, works and completes its slot in one transaction, in its work activity
    # (`activities.run.begin.begin_and_work`, `JobRun.one_transaction`), and runtime schedules
    # of this kind can run in batches (`RuntimeKind.batch`, `activities.runtime.runs`).
    slot_work: str | None = None
    # The params model: by default the annotation of the work's `params` argument (the
    # activity's, or the first step's), the one the method is written against.
    params: type[BaseModel] = None  # type: ignore[assignment]  # set in __post_init__
    # What the kind does: by default the first line of its workflow's or activity's docstring.
    description: str = ""
    # Which of the fleet's task queues the kind's runs use (`core.queues`).
    queue: Queue = "jobs"

    def __post_init__(self) -> None:
        if (self.activity is None) == (self.workflow is None):
            raise ValueError(f"job kind {self.name!r}: give exactly one of activity, workflow")
        if self.workflow is not None and not self.steps:
            raise ValueError(f"job kind {self.name!r}: a workflow kind names its steps")
        if self.activity is not None and self.steps:
            raise ValueError(f"job kind {self.name!r}: steps belong to a workflow kind")
        work = getattr(self.owner, self.activity or self.steps[0])
        if self.params is None:
            object.__setattr__(self, "params", _params_model(self.name, work))
        if not self.description:
            told = (self.workflow or work).__doc__ or ""
            object.__setattr__(self, "description", told.strip().partition("\n")[0])

    @property
    def chunked(self) -> bool:
        """Whether the kind's work activity is written on `run_in_chunks` (the engine reads
        it from the method, no field to set): a run then plans, claims and does its first
        chunk in one transaction, and completes there if its work ended
        (`activities.run.begin.begin_and_work`, `JobRun.chunked`)."""
        if self.activity is None or self.slot_work is not None:
            return False
        return works_in_chunks(getattr(self.owner, self.activity))

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
    # Which of its params name a tenant's resources (`activities.runtime.ownership`: a
    # `TenantRow`, or a check of the kind's own): params naming another tenant's are
    # refused when written, and a slot whose params do by then fails in the transaction
    # that would work it, having done nothing.
    owns: tuple[OwnershipCheck, ...] = ()
    # How a slot run on its own (`RuntimeRunWorkflow`) is timed. The engine heartbeats for
    # the work while its worker lives (`work_activity`), so a slot whose worker died or
    # froze is retried on another replica `heartbeat` after its last sign of life;
    # `timeout` bounds one attempt of a live worker (its start-to-close timeout).
    timeout: timedelta = timedelta(minutes=10)
    heartbeat: timedelta = timedelta(seconds=20)
    # How many attempts a slot's work gets before the slot is recorded failed.
    attempts: int = 10
    # How long after its fire time (its due time, if a calendar moved it) a slot may
    # complete: the audit reports a slot completed later as `slow`, and `check` a slot
    # still running that long as overdue. It covers a lost worker's hand-over (the
    # heartbeat, then the idle-in-transaction timeout that frees a frozen one's rows).
    allowance: timedelta = timedelta(minutes=5)

    def __post_init__(self) -> None:
        if not timedelta(0) < self.heartbeat < self.allowance:
            raise ValueError(
                f"runtime kind {self.name!r}: heartbeat must be positive and shorter than "
                f"allowance (got {self.heartbeat} and {self.allowance})"
            )
        if self.attempts < 1:
            raise ValueError(
                f"runtime kind {self.name!r}: attempts must be >= 1 (got {self.attempts})"
            )
        if self.timeout <= self.heartbeat:
            raise ValueError(
                f"runtime kind {self.name!r}: timeout must be longer than heartbeat "
                f"(got {self.timeout} and {self.heartbeat})"
            )
        longest = work_bound(self.timeout, self.attempts, RUNTIME_RETRY_INTERVAL)
        if longest > RUNTIME_WORK_LIMIT:
            raise ValueError(
                f"runtime kind {self.name!r}: timeout x attempts may take {longest} with "
                f"retries, over the {RUNTIME_WORK_LIMIT.days} days every runtime run's work "
                "is bounded by (activities/common/lifetime.py)"
            )

    @classmethod
    def of(
        cls,
        kind: JobKind,
        *,
        batch: bool = False,
        owns: tuple[OwnershipCheck, ...] = (),
        **timing: Any,
    ) -> RuntimeKind:
        """The runtime kind whose slots `kind` works (its name, params and description);
        `batch`: they run many per activity, through `kind.slot_work`; `owns`: see the
        field (the engine checks them inside the slot's transaction: `kind.slot_work`);
        `timing`: `timeout`, `heartbeat`, `attempts`, `allowance`, if not the defaults."""
        if owns and kind.slot_work is None:
            raise ValueError(
                f"runtime kind {kind.name!r} declares owns: give its slot_work, the work the "
                "engine runs in the transaction that checks them"
            )
        return cls(kind.name, kind.params, batch, kind.description, tuple(owns), **timing)


def _params_model(name: str, work: Callable) -> type[BaseModel]:
    model = get_type_hints(work).get("params")
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise ValueError(f"job kind {name!r}: annotate its work's `params` with a model")
    return model


def parse_params(kind: JobKind, work: WorkInput | StepInput) -> BaseModel:
    """The run's params as the kind's model; a permanent failure, naming the job, if invalid."""
    try:
        return kind.params.model_validate(work.params)
    except ValidationError as exc:
        problems = "; ".join(
            f"params.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        job = work.job_name if isinstance(work, WorkOrBegin) else work.execution.job_name
        raise ApplicationError(
            f"{job}: invalid params: {problems}",
            type="InvalidParams",
            non_retryable=True,
        ) from None


def work_activity(
    kind: JobKind,
    method: Work,
    slot_work: SlotWork | None = None,
    pool: Any = None,
    owns: tuple[OwnershipCheck, ...] = (),
) -> Callable[[WorkOrBegin], Awaitable[WorkResult]]:
    """The activity Temporal runs for `kind`: validate the params once, then do the work of
    the claimed slot; or, given the run's start, begin the run and work its first slot in
    one transaction (`slot_work`, `activities.run.begin.begin_and_work`). A runtime slot of a
    kind whose params name a tenant's resources (`owns`) runs its `slot_work` under their
    check, in the slot's one transaction (`activities.runtime.runs.run_slot`)."""
    checked = owned_work(slot_work, owns) if slot_work is not None and owns else None
    chunked = kind.chunked

    async def run(work: WorkOrBegin) -> WorkResult:
        begin = getattr(work, "begin", None)  # a plain WorkInput, called in-process: none
        if begin is None:
            params = parse_params(kind, work)
            if schedule_id_of(work.execution.job_name) is None:
                return await method(work, params)
            # A runtime slot: the engine heartbeats for the work while this worker lives
            # (`RuntimeKind.heartbeat`), through statements that wait on a lock too.
            if checked is not None:
                return await heartbeating(run_slot(pool, work, checked, params))
            return await heartbeating(method(work, params))
        params = parse_params(kind, work)
        if slot_work is not None:
            return await begin_and_work(pool, begin, slot_work, params)
        if chunked:  # its first chunk in the begin's transaction, the rest in chunks
            return await begin_and_work(pool, begin, None, params, method, work.timing)
        return BegunWork(declined=f"kind {kind.name} works neither in one transaction nor chunks")

    run.__name__ = run.__qualname__ = kind.activity
    run.__doc__ = method.__doc__
    return activity.defn(name=kind.activity)(run)


def owned_work(work: SlotWork, owns: tuple[OwnershipCheck, ...]) -> SlotWork:
    """`work`, after checking in its transaction that the slot's params name only its
    tenant's resources, which stay so until it commits (`activities.runtime.ownership`)."""

    async def checked(conn: Any, execution: ExecutionRef, params: Any) -> dict[str, int]:
        await refuse_foreign_slot(conn, execution, params.model_dump(mode="json"), owns)
        return await work(conn, execution, params)

    return checked


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
        work = getattr(owners[kind.owner], kind.slot_work)
        owns = runtime[kind.name].owns
        batch[kind.name] = _batch_work(kind, owned_work(work, owns) if owns else work)
    return RuntimeKinds(
        {kind.name: kind.activity for kind in single if kind.activity},
        {kind.name: kind.params for kind in single},
        batch,
        {kind.name: runtime[kind.name] for kind in single},
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
    kinds: Iterable[JobKind],
    pool: Any,
    settings: Any = None,
    runtime: Mapping[str, RuntimeKind] | None = None,
) -> list[Callable]:
    """Every kind's activities (its work, or its steps), one owner instance per class,
    bound to `pool` (and `settings`, for the kinds that take them); `runtime`: the runtime
    kinds, whose checks of what their params name a runtime slot's work runs under.
    Raises `ValueError` if two kinds register one activity name."""
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
            slot_work = getattr(owner, kind.slot_work) if kind.slot_work else None
            owns = runtime[kind.name].owns if runtime and kind.name in runtime else ()
            method = getattr(owner, kind.activity)
            add(kind.activity, work_activity(kind, method, slot_work, pool, owns))
        for step in kind.steps:
            add(
                step,
                step_activity(
                    step, pool, getattr(owner, step), functools.partial(parse_params, kind)
                ),
            )
    return list(found.values())
