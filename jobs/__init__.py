"""The jobs the fleet runs: one package per job family, each holding its whole story.

A family's package declares its kinds in `KINDS` (`activities.kinds.JobKind`) and keeps its
params model, its work, its SQL (`queries.sql`) and its demo data for `make run`
(`demo.sql`) beside them; its tables come from a migration in `worker/migrations/` and its
schedules from the catalog (`schedules/jobs.toml`). Packages are found here by looking, so
adding a family touches nothing else in this folder.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

from activities.kinds import JobKind, build_kind_activities


def _discover() -> dict[str, JobKind]:
    found: dict[str, JobKind] = {}
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not module.ispkg:
            continue
        package = importlib.import_module(f"{__name__}.{module.name}")
        for kind in getattr(package, "KINDS", ()):
            if kind.name in found:
                raise ValueError(f"job kind {kind.name!r} is declared twice ({module.name})")
            found[kind.name] = kind
    return found


KINDS: dict[str, JobKind] = _discover()
"""Every job kind by name."""


def kind_activities(pool: Any) -> list[Callable]:
    """Every kind's work activity bound to `pool`, for the worker to register."""
    return build_kind_activities(KINDS.values(), pool)


def demo_data() -> list[tuple[str, Traversable]]:
    """(family, demo.sql) of each family that brings demo data for `make run`, by name."""
    found = []
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        demo = resources.files(f"{__name__}.{module.name}").joinpath("demo.sql")
        if module.ispkg and demo.is_file():
            found.append((module.name, demo))
    return found
