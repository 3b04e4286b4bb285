"""Every write of params, and every slot asked for, checked: a runtime schedule's params
name only its own tenant's resources (the kind's `owns`, `activities.runtime.ownership`).

Run in the write's transaction, before anything is written: create, update, apply and
import check the schedules they write (one statement per check for all of them: an
import of 100,000 lines costs one), trigger and backfill the stored schedule (a resource
can move to another tenant after it was written). A refusal is `InvalidScheduleError`
(exit 2), one line a schedule, the same for a resource that is another tenant's and one
that does not exist.
"""

from __future__ import annotations

from collections.abc import Sequence

from psycopg import AsyncConnection

from activities.runtime.ownership import UnownableValueError, foreign
from core.errors import InvalidScheduleError
from schedules.tenants.kinds import runtime_kinds
from schedules.tenants.model import Definition

_SHOWN = 20  # problems listed in one refusal


async def problems(conn: AsyncConnection, schedules: Sequence[tuple[str, Definition]]) -> list[str]:
    """For each (label, schedule) whose params name a resource its tenant does not own,
    its line, `line 3: schedule 'acme'/'weekly': params.customer_id: names no customer of
    tenant 'acme' (got 7)` (label '': no prefix), in the order given."""
    kinds = runtime_kinds()
    by_kind: dict[str, list[int]] = {}
    for i, (_, schedule) in enumerate(schedules):
        by_kind.setdefault(schedule.kind, []).append(i)
    found: dict[int, str] = {}
    for kind, positions in sorted(by_kind.items()):
        checks = kinds[kind].owns if kind in kinds else ()
        if not checks:
            continue
        items = [schedules[i][1] for i in positions]
        try:
            refused = await foreign(
                conn, checks, [s.tenant for s in items], [s.params for s in items]
            )
        except UnownableValueError as exc:  # no line can be told apart: say what is wrong
            raise InvalidScheduleError(f"kind {kind!r}: {exc}") from None
        found |= {positions[j]: problem for j, problem in refused.items()}
    lines = []
    for i in sorted(found):
        label, schedule = schedules[i]
        prefix = f"{label}: " if label else ""
        lines.append(f"{prefix}schedule {schedule.tenant!r}/{schedule.name!r}: {found[i]}")
    return lines


async def refuse(conn: AsyncConnection, schedules: Sequence[tuple[str, Definition]]) -> None:
    """Raise `InvalidScheduleError` for the `problems` of `schedules` (one line, or a
    count and the first lines); nothing has been written yet."""
    found = await problems(conn, schedules)
    if len(found) == 1:
        raise InvalidScheduleError(found[0])
    if found:
        more = f"\n  ... and {len(found) - _SHOWN} more" if len(found) > _SHOWN else ""
        raise InvalidScheduleError(
            f"{len(found)} schedule(s) name what their tenant does not own; nothing was "
            "written:\n  " + "\n  ".join(found[:_SHOWN]) + more
        )
