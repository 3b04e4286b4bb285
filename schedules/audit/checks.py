"""The audit's checks: from what the ledger and Temporal hold, the findings, each with the
witnesses that show it (row ids, workflow and run ids, outbox ids, attempts, journal seqs).

Pure: the history is data (`history.Ledger`, `history.Visibility`) and `now` is a parameter.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from core.ids import workflow_id
from schedules.audit.agreement import outcome_mismatches, rowless_runs
from schedules.audit.days import Days
from schedules.audit.finding import Finding, row_witnesses
from schedules.audit.history import Ledger, Visibility, Window
from schedules.audit.oracle import TICK, Timing
from schedules.audit.pauses import excused, in_force, paused_scope, unrecorded_pause

# Rows whose slot was chosen by an operator or a caller, not by the timing.
UNTIMED_ORIGINS = ("manual", "direct")
# Rows that did (or are doing) the work of their slot; a skipped one recorded a refusal.
WORKED = ("completed", "running", "failed", "compensated")
TERMINAL = ("completed", "skipped", "failed", "compensated")

KINDS = (
    "lost",
    "late",
    "slow",
    "unexpected",
    "duplicated",
    "stale_write",
    "orphan_effect",
    "orphan_running",
    "outcome_mismatch",
    "missing_row",
    "outbox_pending",
    "outbox_dead",
    "unstarted_intent",
    "dependency_unmet",
    "dropped_by_edit",
    "inconclusive",
)
# The columns of a SQL check's row that witness its finding (schedules/sql/audit.sql).
STALE_WRITE_WITNESSES = (
    "execution_id",
    "attempt",
    "newer_attempt",
    "journal_seq",
    "takeover_seq",
    "txid",
    "outbox_ids",
)
ORPHAN_EFFECT_WITNESSES = ("execution_id", "workflow_id", "run_id", "outbox_ids", "attempts")
# Reported, but not a violation: the exit code stays 0 for these alone.
NOT_VIOLATIONS = frozenset({"inconclusive"})


@dataclass(frozen=True)
class JobScope:
    """How much of a job could be judged: coverage over [start, end), unexpected rows from
    `judged_from` (before, the timing in force then is not known)."""

    job: Any
    start: datetime | None
    end: datetime | None
    judged_from: datetime | None
    note: str = ""
    due: int = 0  # fire times due in [start, end)


def timing_of(job: Any) -> Timing:
    """A job's fire times as the audit reads them: with a business calendar, its slots
    that run (a slot its calendar skips never runs: nothing is due, nothing waits)."""
    days = Days.of(
        getattr(job, "calendar_definition", None),
        getattr(job, "on_holiday", None),
        getattr(job, "on_early_close", None),
    )
    return Timing(job.cron, job.interval, job.timezone, job.start_at, job.end_at, days)


def scope_of(job: Any, ledger: Ledger, window: Window, state: Any) -> JobScope:
    """The part of the window where the job's fire times are known and due.

    From the latest of --from, the job's start_at, and when its current timing took effect
    (`timing_since` in its schedule; without one, its first recorded slot). Up to --to less
    --settle; for a job paused now without a recorded pause (in the catalog or on its
    schedule) or one without a schedule, only up to its last recorded slot: a run after a
    pause records the slots it missed (catch-up), so only the stretch since the last row is
    unknown (`pauses`). Under a recorded pause, up to --to: the pause excuses its times."""
    first_last = ledger.bounds.get(job.id)
    since = getattr(state, "timing_since", None) if state is not None else None
    floor = since or (first_last[0] if first_last else None)
    if floor is None:
        return JobScope(job, None, None, None, "no recorded run and no timing_since")
    start = max(window.start, floor)
    end = min(window.end, window.now - window.settle)
    note = ""
    stopped = job.paused or state is None or not state.exists or state.paused
    if stopped and paused_scope(state, ledger.pauses.get(job.id, ())):
        stopped, note = False, "paused now (recorded): its fire times since are not due"
    if stopped:
        if first_last is None:
            return JobScope(job, None, None, start, "paused or unscheduled, no recorded run")
        end = min(end, first_last[1] + TICK)
        note = "paused or unscheduled: coverage up to its last recorded slot"
    return JobScope(job, start, end if end > start else start, start, note)


def coverage(
    scope: JobScope,
    fires: Sequence[datetime],
    rows: dict[datetime, Any],
    visibility: Visibility | None,
    window: Window,
    due: dict[datetime, datetime] | None = None,
) -> Iterator[Finding]:
    """lost and late: every fire time due in the scope has one terminal row, on time.
    `due`: when each slot a business calendar moved is due (its run's time): it is judged
    from then, not from the slot's own time."""
    due = due or {}
    job = scope.job
    if scope.start is None or scope.end is None:
        return
    runs = {}
    if visibility is not None:
        runs = {r.slot: r for r in visibility.runs.get(job.id, ()) if r.slot is not None}
    limit = (job.starting_deadline or window.late) + job.jitter
    for fire in fires:
        when = due.get(fire, fire)
        if not scope.start <= when < scope.end:
            continue
        row = rows.get(fire)
        if row is None:
            run = runs.get(when)
            witnesses = {"workflow_id": workflow_id(job.id, when)}
            if run is not None:
                witnesses |= {"run_id": run.run_id, "run_status": run.status}
            yield Finding("lost", job.id, fire, "no ledger row for this fire time", witnesses)
            continue
        if row.status not in TERMINAL:
            continue  # running: orphan_running judges it
        lateness = row.started_at - when
        if row.origin == "scheduled" and row.status == "completed" and lateness > limit:
            yield Finding(
                "late",
                job.id,
                fire,
                f"claimed {lateness.total_seconds():.0f}s after its fire time "
                f"(limit {limit.total_seconds():.0f}s)",
                row_witnesses(row),
            )


def asked_for(
    job: Any,
    asked: dict[datetime, dict],
    judged: set[datetime],
    rows: dict[datetime, Any],
    visibility: Visibility | None,
) -> Iterator[Finding]:
    """lost: a slot a recorded backfill asked for (`asked`, schedules/backfills.py) that
    has no ledger row, of those coverage did not judge (`judged`): before the job's timing
    took effect, under a pause, no fire time of its timing. The server keeps nothing of a
    backfill it dropped; the record of the request is what shows it."""
    runs = {}
    if visibility is not None:
        runs = {r.slot: r for r in visibility.runs.get(job.id, ()) if r.slot is not None}
    for slot, request in sorted(asked.items()):
        if slot in judged or slot in rows:
            continue
        witnesses = {"workflow_id": workflow_id(job.id, slot), "backfill_id": request["id"]}
        if (run := runs.get(slot)) is not None:
            witnesses |= {"run_id": run.run_id, "run_status": run.status}
        yield Finding(
            "lost",
            job.id,
            slot,
            "no ledger row for a slot a backfill asked for "
            f"(requested {request['requested_at']:%Y-%m-%dT%H:%M:%SZ})",
            witnesses,
        )


def unexpected(
    scope: JobScope, fires: frozenset[datetime], rows: dict[datetime, Any]
) -> Iterator[Finding]:
    """Rows that did work for a time that is not a fire time of the job's timing."""
    if scope.judged_from is None:
        return
    judged = [r for slot, r in rows.items() if slot >= scope.judged_from]
    worked = [r for r in judged if r.status in WORKED and r.origin not in UNTIMED_ORIGINS]
    for row in worked:
        if row.scheduled_at not in fires:
            yield Finding(
                "unexpected",
                scope.job.id,
                row.scheduled_at,
                f"a {row.status} {row.origin} row for a time that is not a fire time",
                row_witnesses(row),
            )


def temporal_agreement(
    job: Any,
    rows: dict[datetime, Any],
    visibility: Visibility,
    window: Window,
    due: dict[datetime, datetime] | None = None,
) -> Iterator[Finding]:
    """missing_row: a closed run without a row; outcome_mismatch: a terminal row whose run
    ended the other way (both in `agreement`); orphan_running: a row `running` whose run is
    closed (or gone within retention; past it, inconclusive)."""
    yield from rowless_runs(job, rows, visibility, due)
    yield from outcome_mismatches(job, rows, visibility)
    for row in rows.values():
        if row.status != "running" or not row.workflow_id:
            continue
        key = (row.workflow_id, row.run_id)
        if key not in visibility.running:
            continue
        status = visibility.running[key]
        witnesses = row_witnesses(row) | {"run_status": status}
        if status is None:
            retention = visibility.retention
            if retention is not None and row.started_at < window.now - retention:
                yield Finding(
                    "inconclusive",
                    job.id,
                    row.scheduled_at,
                    "row running; its run is past Temporal's retention",
                    witnesses,
                )
                continue
            yield Finding(
                "orphan_running",
                job.id,
                row.scheduled_at,
                "row running; Temporal has no such run",
                witnesses,
            )
        elif status != "RUNNING":
            yield Finding(
                "orphan_running",
                job.id,
                row.scheduled_at,
                f"row left running while its workflow run is {status.lower()}",
                witnesses,
            )


def ledger_findings(ledger: Ledger) -> Iterator[Finding]:
    """stale_write, duplicated, orphan_effect and outbox delivery, from the SQL checks."""
    for w in ledger.stale_writes:
        took_over = f"after attempt {w['newer_attempt']} had taken the slot over"
        detail = f"{w['what']} committed under attempt {w['attempt']} {took_over}"
        yield _of_row("stale_write", w, detail, STALE_WRITE_WITNESSES)
    for d in ledger.outbox_duplicates:
        rows = f"{len(d['outbox_ids'])} {d['type']} outbox rows"
        detail = f"{rows} for one cause ({d['delivered']} delivered)"
        yield _of_row("duplicated", d, detail, ("execution_id", "outbox_ids", "attempts"))
    for f in ledger.failed_effects:
        detail = f"{len(f['outbox_ids'])} outbox row(s) of an execution that ended failed"
        yield _of_row("orphan_effect", f, detail, ORPHAN_EFFECT_WITNESSES)
    for u in ledger.undelivered:
        dead = u["dead_at"] is not None
        state = f"{'dead' if dead else 'still pending'} after {u['attempts']} attempt(s)"
        kind = "outbox_dead" if dead else "outbox_pending"
        yield _of_row(kind, u, f"{u['type']} message {state}", ("outbox_id", "execution_id"))
    by_id = ledger.by_id
    for effect in ledger.domain:
        row = by_id.get(effect["execution_id"])
        yield Finding(
            effect["kind"],
            row.job_name if row else None,
            row.scheduled_at if row else None,
            effect["detail"],
            {"execution_id": effect["execution_id"]} | dict(effect["witnesses"]),
        )


def _of_row(kind: str, row: dict, detail: str, witnesses: Sequence[str]) -> Finding:
    """A finding about the slot of a SQL check's row, its columns `witnesses` the witnesses."""
    return Finding(
        kind, row["job_name"], row["scheduled_at"], detail, {name: row[name] for name in witnesses}
    )


def judge(
    jobs: Sequence[Any],
    ledger: Ledger,
    visibility: Visibility | None,
    states: dict[str, Any],
    window: Window,
) -> tuple[list[Finding], list[JobScope]]:
    """Every finding of the history, and how much of each job could be judged."""
    findings: list[Finding] = []
    scopes = []
    for job in jobs:
        rows = ledger.rows.get(job.id, {})
        scope = scope_of(job, ledger, window, states.get(job.id))
        scopes.append(scope)
        fires: list[datetime] = []
        when: dict[datetime, datetime] = {}  # slot -> when its run is due (a calendar job)
        if scope.judged_from is not None:
            timing = timing_of(job)
            if timing.days is None:
                fires = timing.fire_times(scope.judged_from, window.end)
            else:
                when = timing.due_times(scope.judged_from, window.end)
                when = {s: t for s, t in when.items() if s >= scope.judged_from}
                fires = sorted(when)
        pauses = in_force(ledger.pauses.get(job.id, ()), states.get(job.id), rows)
        expected = [f for f in fires if not excused(pauses, when.get(f, f))]
        judged: set[datetime] = set()
        if scope.start is not None and scope.end is not None:
            judged = {f for f in expected if scope.start <= when.get(f, f) < scope.end}
            scopes[-1] = scope = replace(scope, due=len(judged))
        findings += coverage(scope, expected, rows, visibility, window, when)
        findings += asked_for(job, ledger.asked.get(job.id, {}), judged, rows, visibility)
        state = states.get(job.id)
        findings += unrecorded_pause(job, scope.end, expected, state, pauses, window)
        findings += unexpected(scope, frozenset(fires), rows)
        if visibility is not None:
            findings += temporal_agreement(job, rows, visibility, window, when)
    findings += ledger_findings(ledger)
    order = {kind: i for i, kind in enumerate(KINDS)}
    far = datetime.max.replace(tzinfo=UTC)
    findings.sort(key=lambda f: (f.job or "", f.slot or far, order.get(f.kind, len(order))))
    return findings, scopes
