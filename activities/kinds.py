"""What a job kind is, and how the engine turns each kind into the activity Temporal runs.

A job family's package (`jobs/<family>/`) declares its kinds as `JobKind` values: a name,
a typed params model, and the method that does one slot's work. The engine owns the rest:
the catalog validates a job's `params` against the model before anything reaches Temporal,
and the worker registers each kind's work as one activity, named `kind.activity`, that
validates the params again (a schedule written by an older catalog may carry stale ones) and
calls the method with them. No job repeats that plumbing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.models import WorkInput, WorkResult

Work = Callable[[WorkInput, Any], Awaitable[WorkResult]]


@dataclass(frozen=True)
class JobKind:
    """A kind of job: `activity` names the method of `owner` (a class the worker builds with
    its connection pool) that does one slot's work, taking the `WorkInput` and the params."""

    name: str
    activity: str
    params: type[BaseModel]
    description: str
    owner: type


def parse_params(kind: JobKind, work: WorkInput) -> BaseModel:
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


def build_kind_activities(kinds: Iterable[JobKind], pool: Any) -> list[Callable]:
    """Every kind's work activity, one owner instance per class, bound to `pool`."""
    owners: dict[type, Any] = {}
    found = []
    for kind in kinds:
        owner = owners.setdefault(kind.owner, kind.owner(pool))
        found.append(work_activity(kind, getattr(owner, kind.activity)))
    return found
