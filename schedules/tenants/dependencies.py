"""The checks of runtime schedules' `depends_on` that need the tenant's other schedules
or the catalog (docs/dependencies.md): run inside the write's transaction, under the
tenant's lock, before anything is written.

A runtime schedule may depend on a catalog job (`job`) or on another live schedule of the
same tenant (`schedule`, by name; never another tenant's). Refused, each naming the
schedule, the field and the value: an unknown catalog job or schedule name, a cycle among
the tenant's schedules, a `same` whose fire times do not line up with the upstream's, and
the deletion of a schedule others still depend on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import schedules.tenants.store as store
from core.errors import InvalidScheduleError
from schedules.catalog.dependencies import (
    cycle_problem,
    cycles,
    same_mismatch,
    same_problem,
)
from schedules.catalog.model import default_catalog
from schedules.tenants.model import Definition, Schedule
from timing import Timing


def problems(
    tenant: str,
    schedules: Mapping[str, Definition],
    judged: set[str],
    now: datetime,
) -> list[tuple[str, str]]:
    """The problems of the tenant's set `schedules` (name -> definition, as it would be
    after the write) for the schedules in `judged` and those depending on them, each as
    (the schedule's name, its line)."""
    catalog = default_catalog()
    found: list[tuple[str, str]] = []
    relevant = set(judged) | {
        name for name, s in schedules.items() if any(d.schedule in judged for d in s.depends_on)
    }
    for name in sorted(relevant & set(schedules)):
        schedule = schedules[name]
        for i, dep in enumerate(schedule.depends_on):
            upstream = _upstream_timing(dep, schedules, catalog)
            who = f"schedule {tenant!r}/{name!r}"
            if isinstance(upstream, str):
                found.append((name, f"{who}: depends_on[{i}].{upstream}"))
            elif dep.slots == "same":
                fire = same_mismatch(schedule.timing, upstream, now)
                if fire is not None:
                    problem = same_problem(i, dep.upstream, fire, schedule.timing)
                    found.append((name, f"{who}: {problem}"))
    edges = {
        name: [d.schedule for d in s.depends_on if d.schedule is not None]
        for name, s in schedules.items()
    }
    for name, loop in sorted(cycles(edges).items()):
        if name in judged:  # the schedules written: one line each
            found.append((name, f"schedule {tenant!r}/{name!r}: {cycle_problem(name, loop)}"))
    return found


def _upstream_timing(dep: Any, schedules: Mapping[str, Definition], catalog: Any) -> Timing | str:
    if dep.job is not None:
        job = catalog.get(dep.job)
        if job is None:
            return f"job: no catalog job {dep.job!r} (the catalog has {', '.join(sorted(catalog))})"
        return job.timing
    upstream = schedules.get(dep.schedule)
    if upstream is None:
        return f"schedule: the tenant has no live schedule named {dep.schedule!r}"
    return upstream.timing


def check(
    tenant: str,
    schedules: Mapping[str, Definition],
    judged: set[str],
    now: datetime,
    lines: Mapping[str, int] | None = None,
) -> None:
    """Raise `InvalidScheduleError` (one line, or a count and one line each) for the
    `problems` of the set; nothing has been written yet. `lines`: an import's line number
    of each schedule it gives, which starts that schedule's problem lines."""
    found = [
        f"line {lines[name]}: {line}" if lines and name in lines else line
        for name, line in problems(tenant, schedules, judged, now)
    ]
    if len(found) == 1:
        raise InvalidScheduleError(found[0])
    if found:
        raise InvalidScheduleError(
            f"{len(found)} dependency problem(s); nothing was written:\n  " + "\n  ".join(found)
        )


async def tenant_set(
    conn: Any, tenant: str, writing: Iterable[Definition]
) -> dict[str, Definition]:
    """The tenant's live schedules by name that `problems` can reach from the schedules
    `writing` (read in the write's transaction, under the tenant's lock): those in its
    dependency graph and those the written ones name. A schedule outside the graph has
    no dependency and none on it, so it cannot change the verdict."""
    names = {new.name for new in writing}
    names |= {d.schedule for new in writing for d in new.depends_on if d.schedule is not None}
    rows = await store.all_rows(conn, "tenant_linked", {"tenant": tenant, "names": sorted(names)})
    return {row["name"]: Schedule.of_row(row) for row in rows}


async def refuse_orphaning(conn: Any, tenant: str, names: list[str]) -> None:
    """Refuse to delete schedules that live schedules of the tenant still depend on."""
    rows = await store.all_rows(conn, "dependents", {"tenant": tenant, "names": names})
    dependents = [row["name"] for row in rows]
    if dependents:
        raise InvalidScheduleError(
            f"schedule {tenant!r}/{names[0]!r}: cannot be deleted: "
            f"{', '.join(repr(d) for d in dependents)} depend(s) on it (depends_on); "
            "change or delete those first"
        )
