"""The jobs the fleet runs: job families, each a package holding its whole story.

A family's package declares its kinds in `KINDS` (`activities.run.kinds.JobKind`) and, for the
kinds runtime schedules may name, `RUNTIME_KINDS` (`activities.run.kinds.RuntimeKind`); it keeps
its params model, its work and its SQL (`queries.sql`) beside them, its tables' migrations
in a `migrations/` folder (`NNNN_name.sql`, applied by `python -m worker migrate`) and the
demo data `make run` loads in `demo.sql`. Its schedules come from the catalog.

Families are found in one place, here (`families()`), by everything that needs them: the
worker (the activities and workflows it registers), `python -m schedules` (the kinds a
catalog and a runtime schedule may name) and `python -m worker migrate`:

- the engine's own families (`ENGINE_FAMILIES`: the outbox relay, the runtime dispatchers),
  always, whatever is installed;
- every Python entry point of the group `scheduled_jobs.jobs` (`ENTRY_POINT_GROUP`): its
  name is the family's name, its value the family's package. A user's package declares its
  families so in its own pyproject.toml, and this project declares its reference families
  (`jobs/invoice_reminders`, ...) the same way (docs/jobs.md).
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from types import ModuleType
from typing import Any

from activities.run.kinds import JobKind, RuntimeKind, build_kind_activities, build_runtime_kinds
from activities.runtime.runs import RuntimeKinds
from core.errors import JobFamilyError, first_line

ENTRY_POINT_GROUP = "scheduled_jobs.jobs"
# The engine's own families, by name: loaded by the engine, never through entry points, so
# no install can leave the fleet without its relay or its dispatchers.
ENGINE_FAMILIES = {"outbox_relay": "jobs.outbox_relay", "runtime_dispatch": "jobs.runtime_dispatch"}
_FAMILY_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Family:
    """A job family: its name, its package, and who declared it (`origin`, for errors)."""

    name: str
    package: ModuleType
    origin: str

    @property
    def kinds(self) -> tuple[JobKind, ...]:
        return tuple(getattr(self.package, "KINDS", ()))

    @property
    def runtime_kinds(self) -> tuple[RuntimeKind, ...]:
        return tuple(getattr(self.package, "RUNTIME_KINDS", ()))

    def _file(self, name: str) -> Traversable | None:
        if not hasattr(self.package, "__path__"):  # a plain module carries no files
            return None
        return resources.files(self.package.__name__).joinpath(name)

    @property
    def migrations(self) -> Traversable | None:
        """The family's `migrations/` folder, if it has one."""
        folder = self._file("migrations")
        return folder if folder is not None and folder.is_dir() else None

    @property
    def demo(self) -> Traversable | None:
        """The family's `demo.sql`, if it brings demo data."""
        demo = self._file("demo.sql")
        return demo if demo is not None and demo.is_file() else None


def _load(name: str, module: str, origin: str) -> Family:
    try:
        package = importlib.import_module(module)
    except Exception as exc:  # any error of the family's own code: name it, in one line
        raise JobFamilyError(
            f"job family {origin} failed to import: {type(exc).__name__}: {first_line(exc)}"
        ) from exc
    return Family(name, package, origin)


@functools.cache
def families() -> dict[str, Family]:
    """Every job family by name: the engine's, then each entry point of `ENTRY_POINT_GROUP`
    (on first use). A family that fails to import, a name declared twice, or an entry point
    that names no module raises `JobFamilyError` naming the entry point."""
    from importlib.metadata import entry_points  # on first use only (module import stays cheap)

    found = {
        name: _load(name, module, f"{name!r} (the engine's)")
        for name, module in ENGINE_FAMILIES.items()
    }
    seen: set[tuple[str, str]] = set()
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: (p.name, p.value)):
        if (point.name, point.value) in seen:  # one distribution seen on two paths
            continue
        seen.add((point.name, point.value))
        origin = f"entry point {point.name} = {point.value!r} ({ENTRY_POINT_GROUP})"
        if not _FAMILY_NAME.match(point.name):
            raise JobFamilyError(
                f"job family {origin}: the name must be lowercase letters, digits and _"
            )
        if point.attr:
            raise JobFamilyError(
                f"job family {origin}: the value must name a module, not an attribute"
            )
        if point.name in found:
            raise JobFamilyError(
                f"job family {point.name!r} is declared twice: by {found[point.name].origin} "
                f"and by {origin}"
            )
        found[point.name] = _load(point.name, point.value, origin)
    return dict(sorted(found.items()))


def _declared(attribute: str, what: str) -> dict[str, Any]:
    """What the families declare in `attribute`, by name; a name declared twice is an error."""
    found: dict[str, Any] = {}
    owner: dict[str, str] = {}
    for family in families().values():
        for kind in getattr(family, attribute):
            if kind.name in found:
                raise JobFamilyError(
                    f"{what} {kind.name!r} is declared twice: by job family "
                    f"{owner[kind.name]!r} and by {family.name!r}"
                )
            found[kind.name], owner[kind.name] = kind, family.name
    return found


@functools.cache
def kinds() -> dict[str, JobKind]:
    """Every job kind by name, found in the families (on first use: a job's workflow module
    imports this package inside Temporal's sandbox, which must stay cheap)."""
    return _declared("kinds", "job kind")


@functools.cache
def runtime_kinds() -> dict[str, RuntimeKind]:
    """Every runtime kind (`RUNTIME_KINDS` of the families) by name: the kinds a runtime
    schedule may name (`schedules.tenants.kinds`)."""
    return _declared("runtime_kinds", "runtime kind")


def __getattr__(name: str) -> Any:
    if name == "KINDS":  # `from jobs import KINDS`: every job kind by name
        return kinds()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def kind_activities(pool: Any, settings: Any) -> list[Callable]:
    """Every kind's activities bound to `pool` (and the worker's `settings`, for the kinds
    that take them), for the worker to register."""
    return build_kind_activities(kinds().values(), pool, settings, runtime_kinds())


def runtime_work(pool: Any, settings: Any) -> RuntimeKinds:
    """What runtime schedules' runs need of the kinds (`activities.runtime.runs`), bound to `pool`."""
    return build_runtime_kinds(kinds().values(), runtime_kinds(), pool, settings)


def kind_workflows() -> list[type]:
    """The workflow classes of the workflow kinds, for the worker to register."""
    return [kind.workflow for kind in kinds().values() if kind.workflow is not None]


def demo_data() -> list[tuple[str, Traversable]]:
    """(family, demo.sql) of each family that brings demo data for `make run`, by name."""
    return [(family.name, family.demo) for family in families().values() if family.demo]
