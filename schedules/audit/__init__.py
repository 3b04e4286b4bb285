"""`schedules audit`: an independent checker that judges whole histories (issue 18).

The ledger (`job_executions`), the commit journal, the outbox and Temporal's visibility
are data; this package reads them for a window of scheduled times and reports, with its
witnesses, every slot that was lost, late, unexpected, duplicated, dropped by a timing
edit, written by a stale attempt, left with an orphan effect, or inconsistent between Temporal and the ledger. Its
fire times (`oracle.py`) are computed without `timing/`. Read-only.

`run_audit(conninfo, client, jobs, ...)` is the library entry; `schedules/cli/audit.py` the
command on top of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from temporalio.client import Client

from schedules.audit.checks import NOT_VIOLATIONS, Finding, JobScope, judge
from schedules.audit.dependencies import catalog_findings
from schedules.audit.edits import edit_findings
from schedules.audit.history import Window, read_ledger, read_visibility, recheck
from schedules.audit.runtime import audit_runtime
from schedules.catalog.compile import job_task_queue
from schedules.health.check_run import describe_states

DEFAULT_SETTLE = timedelta(minutes=15)
DEFAULT_LATE = timedelta(minutes=5)
DEFAULT_OUTBOX_AGE = timedelta(minutes=15)
DEFAULT_SPAN = timedelta(days=7)
DEFAULT_PAGES_PER_SECOND = 20.0


@dataclass
class AuditReport:
    findings: list[Finding]
    scopes: list[JobScope]
    window: Window
    rows: int
    runs: int
    facts: dict[str, Any] = field(default_factory=dict)
    zones: dict[str, str] = field(default_factory=dict)  # runtime schedules' zones

    @property
    def exit_code(self) -> int:
        """0 clean (inconclusive findings alone included), 1 at least one violation."""
        return 1 if any(f.kind not in NOT_VIOLATIONS for f in self.findings) else 0


async def run_audit(
    conninfo: str,
    client: Client,
    jobs: Sequence[Any],
    *,
    task_queue: str,
    now: datetime,
    start: datetime | None = None,
    end: datetime | None = None,
    settle: timedelta = DEFAULT_SETTLE,
    late: timedelta = DEFAULT_LATE,
    outbox_age: timedelta = DEFAULT_OUTBOX_AGE,
    only_jobs: bool = False,
    pages_per_second: float = DEFAULT_PAGES_PER_SECOND,
    timeout: float = 30.0,
    states: dict[str, Any] | None = None,
    runtime: bool = False,
    known: Sequence[Any] = (),
) -> AuditReport:
    """Audit `jobs` (catalog entries) over the scheduled times [start, end) as of `now`.

    `end` defaults to `now`, `start` to 7 days before `end`. `only_jobs`: the outbox
    delivery check looks only at the messages of these jobs (else at every message queued
    in the window). `task_queue` is the fleet's: the runs listed are those on each job's
    queue of it (`job_task_queue`: the dispatchers' own).
    `pages_per_second`: at most that many calls a second to Temporal's visibility (listing
    pages, describes of runs in flight): a job's runs are one listing page at least.
    `states` (each job's `schedules.health.check.ScheduleState`: paused, timing_since) default to
    what Temporal's schedules say now. `runtime`: judge the runtime schedules too
    (`schedules.audit.runtime`). `known`: catalog jobs besides `jobs` that may be their
    upstreams (`depends_on`; docs/dependencies.md), whose schedules are described too.
    Raises on a source that cannot be read (the CLI's exit 2).
    """
    end = end or now
    window = Window(start or end - DEFAULT_SPAN, end, now, settle, late, outbox_age)
    job_ids = [job.id for job in jobs]
    known = list({job.id: job for job in [*jobs, *known]}.values())
    upstream_ids = {d.job for job in jobs for d in getattr(job, "depends_on", ())}
    described_ids = [j.id for j in known if j.id in set(job_ids) | upstream_ids]
    described, ledger = await asyncio.gather(
        describe_states(client, described_ids, timeout) if states is None else _given(states),
        read_ledger(conninfo, jobs, window, only_jobs=only_jobs, timeout=timeout),
    )
    visibility = await read_visibility(
        client,
        {job.id: job_task_queue(job, task_queue) for job in jobs},
        window,
        ledger.running(),
        pages_per_second=pages_per_second,
        timeout=timeout,
    )
    findings, scopes = judge(jobs, ledger, visibility, described, window)
    findings += await catalog_findings(conninfo, jobs, known, ledger.rows, described, timeout)
    findings += await edit_findings(conninfo, job_ids, window, timeout)
    rows = sum(len(r) for r in ledger.rows.values())
    runs = sum(len(r) for r in visibility.runs.values())
    zones: dict[str, str] = {}
    if runtime:
        judged = await audit_runtime(
            conninfo,
            client,
            window,
            task_queue=task_queue,
            timeout=timeout,
            catalog=known,
            states=described,
            pages_per_second=pages_per_second,
        )
        findings, scopes = findings + judged.findings, scopes + judged.scopes
        rows, runs, zones = rows + judged.rows, runs + judged.runs, judged.zones
    findings = await _confirmed(conninfo, findings, timeout)
    return AuditReport(findings, scopes, window, rows=rows, runs=runs, zones=zones)


# Findings about a row's absence or state, read before Temporal was: confirmed after it.
_RACY = {"lost": None, "missing_row": None, "orphan_running": "running"}


async def _confirmed(conninfo: str, findings: list[Finding], timeout: float) -> list[Finding]:
    """Drop the findings a run in flight made stale while Temporal was read: a slot claimed
    since (lost, missing_row), a row finished since (orphan_running)."""
    racy = [f for f in findings if f.kind in _RACY and f.job and f.slot]
    now = await recheck(conninfo, [(f.job, f.slot) for f in racy], timeout)
    return [f for f in findings if f.kind not in _RACY or now.get((f.job, f.slot)) == _RACY[f.kind]]


async def _given(states: dict[str, Any]) -> dict[str, Any]:
    return states
