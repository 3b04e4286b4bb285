"""The audit's check of slot dependencies: `dependency_unmet`, a slot whose work started
before the upstream slots mapped onto it had completed (docs/dependencies.md).

Computed apart from the engine (`activities.dependencies.judge`): the mapping is done again
here with the audit's own fire times (`oracle.py`), from the dependency as the catalog
(or the runtime schedule's row) states it:

By slots: a job with a business calendar is read with it (`days.py`), as its slots
that run (a slot its calendar moves is still its own time's; one it skips is never
waited for); our `window` starts at our previous fire time on our cron's grid.

- `same`: the upstream's fire time at our slot, if it has one;
- `window`: its fire times after our previous fire time (on our cron's grid), up to and
  including our slot;
- `latest`: its last fire time at or before our slot;

never one before the upstream's timing took effect (its schedule's `timing_since`, else
its first recorded slot): such a slot was never due. "Work started" is the slot's first
take-over in the commit journal (every path to the work raises the fencing token first);
an upstream slot is complete then if its row is `completed` with `finished_at` before it.

Excused: a run anyway that its policy allowed: the dependency says `on_failure = "run"`,
the run recorded that decision (`dependency_waits.status = 'run_anyway'`), and either its
deadline had passed when the work started (`within` after the slot, or after the run
began to wait if later) or an unmet upstream slot settled without completing (failed,
compensated, skipped). Pure but for `read_facts`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from core.sql import queries
from schedules.audit.checks import timing_of  # with its calendar: the slots that run
from schedules.audit.finding import Finding, row_witnesses
from schedules.audit.oracle import Timing

_Q = queries("schedules.sql", "audit")

_TICK = timedelta(microseconds=1)
_LOOKBACK = (timedelta(days=1), timedelta(days=32), timedelta(days=400))
WORKED = ("completed", "failed", "compensated", "running")
UNDONE = ("failed", "compensated", "skipped")
SHOWN = 5


@dataclass(frozen=True)
class Upstream:
    """An upstream as the audit knows it: its ledger name, when it fires, since when."""

    ledger: str
    timing: Timing
    floor: datetime | None  # its timing_since, else its first recorded slot


@dataclass
class Facts:
    """What the check reads besides the downstream's rows."""

    work_started: dict[int, datetime] = field(default_factory=dict)  # execution -> first take-over
    waits: dict[int, Any] = field(default_factory=dict)  # execution -> dependency_waits row
    # upstream ledger name -> slot -> (status, finished_at, execution id)
    upstream_rows: dict[str, dict[datetime, tuple[str, datetime | None, int]]] = field(
        default_factory=dict
    )


def _last_before(timing: Timing, instant: datetime) -> datetime | None:
    """The newest fire time strictly before `instant`, looking back up to 400 days."""
    for span in _LOOKBACK:
        found = timing.fire_times(instant - span, instant)
        if found:
            return found[-1]
    return None


def mapped(slots: str, ours: Timing, slot: datetime, upstream: Upstream) -> list[datetime]:
    """The upstream fire times mapped onto our `slot`, by the audit's own reading."""
    if slots == "same":
        found = upstream.timing.fire_times(slot, slot + _TICK)
    elif slots == "latest":
        latest = _last_before(upstream.timing, slot + _TICK)
        found = [latest] if latest is not None else []
    else:
        grid = Timing(ours.cron, ours.interval, ours.timezone)
        previous = _last_before(grid, slot)
        start = previous + _TICK if previous is not None else slot
        found = upstream.timing.fire_times(start, slot + _TICK)
    return [f for f in found if upstream.floor is None or f >= upstream.floor]


def unmet_findings(
    job_id: str,
    ours: Timing,
    depends_on: Sequence[Any],
    rows: dict[datetime, Any],
    upstreams: dict[str, Upstream | None],
    facts: Facts,
) -> Iterator[Finding]:
    """`dependency_unmet` for each of the job's rows whose work started too early."""
    for slot, row in sorted(rows.items()):
        started = facts.work_started.get(row.id)
        if row.status not in WORKED or started is None:
            continue
        for dep in depends_on:
            key = dep.job if dep.job is not None else f"schedule:{dep.schedule}"
            upstream = upstreams.get(key)
            if upstream is None:
                continue  # an upstream the audit cannot find: nothing to judge against
            seen = facts.upstream_rows.get(upstream.ledger, {})
            unmet = [
                (s, seen.get(s))
                for s in mapped(dep.slots, ours, slot, upstream)
                if not _done_by(seen.get(s), started)
            ]
            if unmet and not _excused(dep, row, started, unmet, facts.waits.get(row.id)):
                yield _finding(job_id, row, started, upstream, unmet)


def _done_by(found: tuple | None, started: datetime) -> bool:
    return (
        found is not None
        and found[0] == "completed"
        and found[1] is not None
        and (found[1] <= started)
    )


def _excused(dep: Any, row: Any, started: datetime, unmet: list, wait: Any) -> bool:
    """A run anyway its policy allowed: past its deadline when its work started, or an
    unmet slot settled undone (now, or as the run recorded it when it decided: a failed
    upstream slot may have been run again since)."""
    if dep.on_failure != "run" or wait is None or wait["status"] != "run_anyway":
        return False
    deadline = max(row.scheduled_at, wait["began_at"]) + dep.within
    recorded = wait.get("failed", frozenset())
    settled_undone = any(
        (found is not None and found[0] in UNDONE) or slot in recorded for slot, found in unmet
    )
    return started >= deadline or settled_undone


def _recorded_failed(detail: Any) -> frozenset[datetime]:
    """The upstream slots a wait recorded as settled undone when it last checked."""
    found = set()
    for upstream in detail or ():
        for slot, *_ in upstream.get("failed") or ():
            found.add(datetime.fromisoformat(slot.replace("Z", "+00:00")))
    return frozenset(found)


def _finding(job_id: str, row: Any, started: datetime, upstream: Upstream, unmet: list) -> Finding:
    shown = [
        {
            "slot": f"{s.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}",
            "status": found[0] if found else "no row",
            "finished_at": found[1].isoformat() if found and found[1] else None,
            "execution_id": found[2] if found else None,
        }
        for s, found in unmet[:SHOWN]
    ]
    return Finding(
        "dependency_unmet",
        job_id,
        row.scheduled_at,
        f"work started {started.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ} before {len(unmet)} "
        f"slot(s) of its upstream {upstream.ledger} had completed",
        row_witnesses(row)
        | {"work_started": started.isoformat(), "upstream": upstream.ledger, "unmet": shown},
    )


@dataclass(frozen=True)
class Downstream:
    """A job with dependencies, as the check judges it: its id, fire times, dependencies
    (each with `job` or `schedule`, `slots`, `within`, `on_failure`) and window rows."""

    job_id: str
    timing: Timing
    depends_on: Sequence[Any]
    rows: dict[datetime, Any]


async def read_facts(
    conn: Any, downstreams: Sequence[Downstream], upstreams: dict[str, Upstream | None]
) -> Facts:
    """Read the first take-over and the wait record of every row that worked, and the
    upstream rows of the slots mapped onto them, in the audit's read-only session."""
    worked = [row.id for d in downstreams for row in d.rows.values() if row.status in WORKED]
    facts = Facts()
    if not worked:
        return facts
    cur = await conn.execute(_Q["work_started"], {"ids": worked})
    facts.work_started = dict(await cur.fetchall())
    cur = await conn.execute(_Q["dependency_waits"], {"ids": worked})
    facts.waits = {
        r[0]: {"status": r[1], "began_at": r[2], "reason": r[3], "failed": _recorded_failed(r[4])}
        for r in await cur.fetchall()
    }
    needed: dict[str, set[datetime]] = {}
    for d in downstreams:
        for row in d.rows.values():
            if row.id not in facts.work_started:
                continue
            for dep in d.depends_on:
                up = upstreams.get(dep.job if dep.job is not None else f"schedule:{dep.schedule}")
                if up is not None:
                    needed.setdefault(up.ledger, set()).update(
                        mapped(dep.slots, d.timing, row.scheduled_at, up)
                    )
    for ledger, slots in needed.items():
        cur = await conn.execute(_Q["upstream_slots"], {"job": ledger, "slots": sorted(slots)})
        facts.upstream_rows[ledger] = {r[0]: (r[1], r[2], r[3]) for r in await cur.fetchall()}
    return facts


async def first_slots(conn: Any, ledgers: Sequence[str]) -> dict[str, datetime]:
    """Each job's first recorded slot: the floor of an upstream with no `timing_since`."""
    cur = await conn.execute(_Q["first_slots"], {"jobs": list(ledgers)})
    return dict(await cur.fetchall())


def findings(
    downstreams: Sequence[Downstream], upstreams: dict[str, Upstream | None], facts: Facts
) -> list[Finding]:
    return [
        f
        for d in downstreams
        for f in unmet_findings(d.job_id, d.timing, d.depends_on, d.rows, upstreams, facts)
    ]


async def catalog_findings(
    conninfo: str,
    jobs: Sequence[Any],
    known: Sequence[Any],
    rows: dict[str, dict[datetime, Any]],
    states: dict[str, Any],
    timeout: float,
) -> list[Finding]:
    """`dependency_unmet` of the catalog jobs `jobs` (their window `rows`), whose upstreams
    are found among `known` jobs; each upstream's floor is its schedule's `timing_since`
    in `states` (else its first recorded slot)."""
    downstreams = [
        Downstream(job.id, timing_of(job), job.depends_on, rows.get(job.id, {}))
        for job in jobs
        if getattr(job, "depends_on", None)
    ]
    if not downstreams:
        return []
    by_id = {job.id: job for job in known}
    wanted = sorted({dep.job for d in downstreams for dep in d.depends_on if dep.job in by_id})
    async with await psycopg.AsyncConnection.connect(
        conninfo, connect_timeout=max(2, int(timeout))
    ) as conn:
        await conn.set_read_only(True)
        first = await first_slots(conn, wanted)
        upstreams: dict[str, Upstream | None] = {}
        for job_id in wanted:
            since = getattr(states.get(job_id), "timing_since", None)
            upstreams[job_id] = Upstream(
                job_id, timing_of(by_id[job_id]), since or first.get(job_id)
            )
        facts = await read_facts(conn, downstreams, upstreams)
    return findings(downstreams, upstreams, facts)
