"""The jobs the fleet runs: one package per job family, each holding its whole story.

A family's package declares its kinds in `KINDS` (`activities.kinds.JobKind`) and keeps its
params model, its work, its SQL (`queries.sql`) and its demo data for `make run`
(`demo.sql`) beside them; its tables come from a migration in `worker/migrations/` and its
schedules from the catalog (`schedules/jobs.toml`). Packages are found here by looking, so
adding a family touches nothing else in this folder.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

from activities.kinds import JobKind, RuntimeKind, build_kind_activities, build_runtime_kinds
from activities.runtime import RuntimeKinds


def _declared(attribute: str, what: str) -> dict[str, Any]:
    """What the packages under `jobs/` declare in `attribute`, by name; a name declared
    twice is an error."""
    found: dict[str, Any] = {}
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not module.ispkg:
            continue
        package = importlib.import_module(f"{__name__}.{module.name}")
        for kind in getattr(package, attribute, ()):
            if kind.name in found:
                raise ValueError(f"{what} {kind.name!r} is declared twice ({module.name})")
            found[kind.name] = kind
    return found


@functools.cache
def kinds() -> dict[str, JobKind]:
    """Every job kind by name, found in the packages under `jobs/` (on first use: a job's
    workflow module imports this package inside Temporal's sandbox, which must stay cheap)."""
    return _declared("KINDS", "job kind")


@functools.cache
def runtime_kinds() -> dict[str, RuntimeKind]:
    """Every runtime kind (`RUNTIME_KINDS` of the packages under `jobs/`) by name: the kinds
    a runtime schedule may name (`schedules.tenants.kinds`)."""
    return _declared("RUNTIME_KINDS", "runtime kind")


def __getattr__(name: str) -> Any:
    if name == "KINDS":  # `from jobs import KINDS`: every job kind by name
        return kinds()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def kind_activities(pool: Any, settings: Any) -> list[Callable]:
    """Every kind's activities bound to `pool` (and the worker's `settings`, for the kinds
    that take them), for the worker to register."""
    return build_kind_activities(kinds().values(), pool, settings, runtime_kinds())


def runtime_work(pool: Any, settings: Any) -> RuntimeKinds:
    """What runtime schedules' runs need of the kinds (`activities.runtime`), bound to `pool`."""
    return build_runtime_kinds(kinds().values(), runtime_kinds(), pool, settings)


def kind_workflows() -> list[type]:
    """The workflow classes of the workflow kinds, for the worker to register."""
    return [kind.workflow for kind in kinds().values() if kind.workflow is not None]


def demo_data() -> list[tuple[str, Traversable]]:
    """(family, demo.sql) of each family that brings demo data for `make run`, by name."""
    found = []
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        demo = resources.files(f"{__name__}.{module.name}").joinpath("demo.sql")
        if module.ispkg and demo.is_file():
            found.append((module.name, demo))
    return found
