"""The audit of runtime schedules (issue 21): the same judgement as catalog jobs'.

Each runtime schedule is judged as a job `rt-<id>` (its ledger name) by the audit's own
checks (`checks.coverage`, `unexpected`, `temporal_agreement`, `ledger_findings`), with
fire times from the audit's own oracle (`oracle.py`, independent of `timing/`), computed
once per distinct timing, since thousands of schedules share a few. Coverage: every fire
time since the schedule's `timing_since`, outside its pauses (from its change log, from one
dispatch grace before the pause to the resume; a schedule created paused, from its creation) and before its deletion, older than
--settle, has one terminal ledger row, and a scheduled slot completed within its kind's
allowance of being due (`slow`, `RuntimeKind.allowance`). Of the grace, only the slots not
decided yet are left out: one due before the dispatcher's next slot as the pause or delete
found it was decided, and is judged. Besides: `unstarted_intent`, a start decided
(`runtime_dispatch_intents`) longer than --settle ago that no run took up.

Temporal's side: the runs of `RuntimeRunWorkflow` started in the window (listed once,
each run's slot read from its id), and each row still `running` described.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row
from temporalio.client import Client

from core.sql import queries
from schedules.audit.checks import (
    Finding,
    JobScope,
    coverage,
    ledger_findings,
    scope_of,
    temporal_agreement,
    unexpected,
)
from schedules.audit.days import Days
from schedules.audit.dependencies import (
    Downstream,
    Upstream,
    first_slots,
    read_facts,
    timing_of,
)
from schedules.audit.dependencies import findings as dependency_findings
from schedules.audit.edits import edit_findings
from schedules.audit.history import (
    PAGE_SIZE,
    Run,
    Visibility,
    Window,
    _iso,
    _Rate,
    _retention,
    describe_running,
    read_ledger,
    slot_of,
)
from schedules.audit.oracle import Timing
from schedules.audit.runtime_slots import deferred_note, slow, unstarted
from schedules.catalog.dependencies import RuntimeDependency
from schedules.tenants.kinds import allowance_of

_Q = queries("schedules.sql", "audit_runtime")
# A pause applies from the next dispatch tick: a slot due this long before it may still run.
PAUSE_GRACE = timedelta(minutes=2)
RUN_WORKFLOW = "RuntimeRunWorkflow"


@dataclass(frozen=True)
class Stop:
    """A pause [start, end] (None: still paused) or a delete (end None), and what the
    dispatcher had decided when it came: every slot due before `next_fire_at` (None: every
    slot). `known` False: written before the change log kept it (the whole grace is left
    out, as before)."""

    start: datetime
    end: datetime | None
    known: bool = False
    next_fire_at: datetime | None = None

    def excuses(self, due: datetime) -> bool:
        """Whether it leaves out a slot due at `due`: one in it, or in the grace before it,
        that the dispatcher had not decided."""
        decided = self.known and (self.next_fire_at is None or due < self.next_fire_at)
        in_it = self.start - PAUSE_GRACE <= due and (self.end is None or due <= self.end)
        return in_it and not decided


@dataclass(frozen=True)
class RuntimeJob:
    """A runtime schedule, in the shape the audit's checks read a catalog job."""

    id: str  # rt-<schedule id>: its ledger name
    schedule_id: int
    tenant: str
    name: str
    kind: str
    cron: str
    timezone: str
    start_at: datetime | None
    end_at: datetime | None
    interval: None = None
    jitter: timedelta = timedelta(0)
    starting_deadline: None = None
    paused: bool = False  # pauses are intervals (`stopped`), not a state
    calendar_definition: Any = None  # its business calendar (`schedules.audit.days`)
    on_holiday: str | None = None
    depends_on: tuple[Any, ...] = ()  # RuntimeDependency values (docs/dependencies.md)
    # Held back by its tenant's limit (issue 40): the slot due at `next_fire_at` and later
    # ones are deferred, not lost; why (`2 in flight (limit 2)`).
    deferred_from: datetime | None = None
    deferred_reason: str | None = None


@dataclass(frozen=True)
class RuntimeState:
    """What `checks.scope_of` reads of a schedule's state."""

    timing_since: datetime
    exists: bool = True
    paused: bool = False


@dataclass
class RuntimeAudit:
    findings: list[Finding]
    scopes: list[JobScope]
    rows: int
    runs: int
    zones: dict[str, str]


async def audit_runtime(
    conninfo: str,
    client: Client,
    window: Window,
    *,
    task_queue: str,
    timeout: float,
    catalog: Sequence[Any] = (),
    states: dict[str, Any] | None = None,
    pages_per_second: float = 20.0,
) -> RuntimeAudit:
    """Judge every runtime schedule over `window`; raises on a source that cannot be read.
    `catalog` and its schedules' `states`: the catalog jobs runtime schedules may depend on.
    `pages_per_second`: Temporal's visibility read at most that many calls a second."""
    schedules, stopped, intents = await _read_schedules(conninfo, window, timeout)
    jobs = [job for job, _ in schedules]
    if not jobs:
        return RuntimeAudit([], [], 0, 0, {})
    ledger = await read_ledger(conninfo, jobs, window, only_jobs=True, timeout=timeout)
    visibility = await _visibility(
        client,
        {j.id for j in jobs},
        task_queue,
        window,
        ledger.running(),
        timeout,
        pages_per_second,
    )
    findings: list[Finding] = []
    scopes = []
    fires_of: dict[Timing, dict[datetime, datetime]] = {}  # slot -> when its run is due
    for job, state in schedules:
        rows = ledger.rows.get(job.id, {})
        scope = scope_of(job, ledger, window, state)
        fires: list[datetime] = []
        when: dict[datetime, datetime] = {}
        if scope.judged_from is not None:
            days = Days.of(job.calendar_definition, job.on_holiday)
            timing = Timing(job.cron, None, job.timezone, job.start_at, job.end_at, days)
            if timing not in fires_of:
                fires_of[timing] = timing.due_times(window.start, window.end)
            when = {s: t for s, t in fires_of[timing].items() if s >= scope.judged_from}
            fires = sorted(when)
        due = [f for f in fires if not _stopped(when[f], stopped.get(job.schedule_id, ()))]
        if job.deferred_from is not None:
            deferred = [f for f in due if when[f] >= job.deferred_from]
            due = [f for f in due if when[f] < job.deferred_from]
            if deferred:
                scope = replace(scope, note=deferred_note(scope.note, job, deferred, window))
        if scope.start is not None and scope.end is not None:
            count = sum(1 for f in due if scope.start <= when[f] < scope.end)
            scope = replace(scope, due=count)
        scopes.append(scope)
        findings += coverage(scope, due, rows, visibility, window, when)
        findings += slow(job, rows, when, allowance_of(job.kind))
        findings += unexpected(scope, frozenset(fires), rows)
        findings += temporal_agreement(job, rows, visibility, window, when)
    findings += ledger_findings(ledger)
    findings += unstarted(intents)
    findings += await edit_findings(conninfo, [j.id for j in jobs], window, timeout)
    findings += await _dependencies(conninfo, schedules, ledger, catalog, states or {}, timeout)
    return RuntimeAudit(
        findings,
        scopes,
        rows=sum(len(r) for r in ledger.rows.values()),
        runs=sum(len(r) for r in visibility.runs.values()),
        zones={job.id: job.timezone for job in jobs},
    )


def _stopped(fire: datetime, stops: tuple[Stop, ...]) -> bool:
    """Whether a pause or the deletion leaves out the slot due at `fire`."""
    return any(stop.excuses(fire) for stop in stops)


async def _read_schedules(
    conninfo: str, window: Window, timeout: float
) -> tuple[list[tuple[RuntimeJob, RuntimeState]], dict[int, tuple[Stop, ...]], list[dict]]:
    params = {"from": window.start, "to": window.end, "settled": window.now - window.settle}
    async with await psycopg.AsyncConnection.connect(
        conninfo, connect_timeout=max(2, int(timeout))
    ) as conn:
        await conn.set_read_only(True)
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(_Q["schedules"], params)
        rows = await cur.fetchall()
        await cur.execute(_Q["pauses"], {"ids": [r["id"] for r in rows]})
        changes = await cur.fetchall()
        await cur.execute(_Q["intents"], params)
        intents = await cur.fetchall()
    spans: dict[int, list[Stop]] = {}
    opened: dict[int, Stop] = {}
    deleted: dict[int, Stop] = {}
    for change in changes:
        sid = change["schedule_id"]
        stop = Stop(change["at"], None, change["decided"], change["next_fire_at"])
        if change["action"] in ("pause", "create"):  # a create here was paused
            opened.setdefault(sid, stop)
        elif change["action"] == "delete":
            deleted[sid] = stop
        elif sid in opened:
            spans.setdefault(sid, []).append(replace(opened.pop(sid), end=change["at"]))
    for sid, stop in opened.items():
        spans.setdefault(sid, []).append(stop)
    schedules = []
    for r in rows:
        if r["deleted_at"] is not None:
            stop = deleted.get(r["id"], Stop(r["deleted_at"], None))
            spans.setdefault(r["id"], []).append(replace(stop, start=r["deleted_at"]))
        job = RuntimeJob(
            depends_on=tuple(RuntimeDependency.model_validate(d) for d in r["depends_on"]),
            id=f"rt-{r['id']}",
            schedule_id=r["id"],
            tenant=r["tenant"],
            name=r["name"],
            kind=r["kind"],
            cron=r["cron"],
            timezone=r["timezone"],
            start_at=r["start_at"],
            end_at=r["end_at"],
            calendar_definition=r["calendar_definition"],
            on_holiday=r["on_holiday"],
            deferred_from=r["next_fire_at"] if r["deferred_at"] is not None else None,
            deferred_reason=r["deferred_reason"],
        )
        schedules.append((job, RuntimeState(timing_since=r["timing_since"])))
    return schedules, {sid: tuple(s) for sid, s in spans.items()}, intents


async def _dependencies(
    conninfo: str,
    schedules: list[tuple[RuntimeJob, RuntimeState]],
    ledger: Any,
    catalog: Sequence[Any],
    states: dict[str, Any],
    timeout: float,
) -> list[Finding]:
    """`dependency_unmet` of the runtime schedules with dependencies: upstreams are catalog
    jobs (floor: their schedule's timing_since, else their first slot) or schedules of the
    same tenant by name (the live one, else the latest; floor: its timing_since)."""
    waiting = [(job, state) for job, state in schedules if job.depends_on]
    if not waiting:
        return []
    named: dict[tuple[str, str], tuple[RuntimeJob, RuntimeState]] = {}
    for job, state in schedules:  # by id: a later schedule of a name wins
        named[(job.tenant, job.name)] = (job, state)
    by_id = {job.id: job for job in catalog}
    downstreams, upstreams = [], {}
    for job, _ in waiting:
        keys = {}
        for dep in job.depends_on:
            if dep.job is not None:
                up = by_id.get(dep.job)
                since = getattr(states.get(dep.job), "timing_since", None)
                found = Upstream(dep.job, timing_of(up), since) if up is not None else None
            else:
                up_job, up_state = named.get((job.tenant, dep.schedule), (None, None))
                found = (
                    Upstream(up_job.id, timing_of(up_job), up_state.timing_since)
                    if up_job is not None
                    else None
                )
            keys[dep.job if dep.job is not None else f"schedule:{dep.schedule}"] = found
        upstreams[job.id] = keys
        downstreams.append(
            Downstream(job.id, timing_of(job), job.depends_on, ledger.rows.get(job.id, {}))
        )
    found_all: list[Finding] = []
    async with await psycopg.AsyncConnection.connect(
        conninfo, connect_timeout=max(2, int(timeout))
    ) as conn:
        await conn.set_read_only(True)
        first = await first_slots(
            conn, [u.ledger for ups in upstreams.values() for u in ups.values() if u]
        )
        for down in downstreams:
            ups = {
                k: (replace(u, floor=u.floor or first.get(u.ledger)) if u else None)
                for k, u in upstreams[down.job_id].items()
            }
            facts = await read_facts(conn, [down], ups)
            found_all += dependency_findings([down], ups, facts)
    return found_all


async def _visibility(
    client: Client,
    job_ids: set[str],
    task_queue: str,
    window: Window,
    running: list[tuple[str, str]],
    timeout: float,
    pages_per_second: float = 20.0,
) -> Visibility:
    """The window's runs of RuntimeRunWorkflow by schedule, and each running row's run."""
    rate = _Rate(pages_per_second)
    seen = Visibility(retention=await _retention(client, timeout))
    query = (
        f"WorkflowType = '{RUN_WORKFLOW}' AND TaskQueue = '{task_queue}' "
        f"AND StartTime >= '{_iso(window.start)}'"
    )
    pages = client.list_workflows(query, page_size=PAGE_SIZE)
    while True:
        await rate.wait()
        async with asyncio.timeout(timeout):
            await pages.fetch_next_page()
        for ex in pages.current_page or ():
            job_id = ex.id.rsplit("-", 3)[0] if ex.id.count("-") >= 4 else ""
            slot = slot_of(job_id, ex.id)
            if job_id in job_ids and slot is not None and window.start <= slot < window.end:
                status = ex.status.name if ex.status is not None else "UNKNOWN"
                seen.runs.setdefault(job_id, []).append(Run(ex.id, ex.run_id, status, slot))
        if not pages.next_page_token:
            break
    await describe_running(client, seen, running, rate, timeout)
    return seen


def runtime_facts(audit: RuntimeAudit) -> dict[str, Any]:
    """The runtime schedules' part of the audit's summary line."""
    return {
        "runtime_schedules": len(audit.scopes),
        "runtime_fire_times": sum(s.due for s in audit.scopes),
        "runtime_rows": audit.rows,
    }
