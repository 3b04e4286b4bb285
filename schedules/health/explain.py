"""`python -m schedules explain JOB [--at TIME]`: did a fire time run and, if not, why.

The answer comes from the record (the slot's `job_executions` row) and from the server (the
schedule's state, the slot's workflow, the workers polling the task queue), never from a
guess: `gather` collects that evidence and `explain` (pure, so every reason is unit-tested)
turns it into one verdict, in this order:

- a run started at that time off the job's fire times (a trigger, a direct start: its slot
  is its start, named to the second) is judged by its row, as a fire time's;
- the time is not one of the job's fire times;
- a timing edit stranded the slot (`schedules.edits`) and it has no row: dropped by the
  edit, or kept and not run yet;
- its business calendar skips it, or its run (where its calendar moved it) has not come yet;
- the slot has a row: completed (it ran), skipped (by the catch-up policy, the starting
  deadline, the repeated DST hour, a future slot, a dependency's policy: the row says
  which), failed after N attempts, compensated, waiting for its upstream slots (what it
  waits for, its deadline), still running, or left running by a run that is gone;
- no row: Temporal cannot be asked; the job has no schedule; the time is before the job's
  current timing took effect, or outside its start/end; the schedule is paused; the slot's
  run was started but no worker polls the task queue (or none has claimed it yet); the run
  ended without a record; a backfill covered it and the server skipped it under its overlap
  policy (the Web UI dialog's default, Skip); or Temporal never started it (down at that time, or the run
  would have overlapped a running one) and no later run has recorded it as missed yet.

Exit codes: 0 it ran (completed); 1 it did not, and the reason is printed; 2 cannot tell
(Temporal or PostgreSQL unreachable) or bad input.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from activities.catchup.backfills import BackfillRequest
from schedules.catalog.durations import format_duration
from schedules.catalog.model import JobSpec
from schedules.catalog.times import local_text, utc_text
from schedules.server.state import ServerState


@dataclass
class Evidence:
    """What is known about one fire time of one job, from the record and the server."""

    job: JobSpec
    fire: datetime
    now: datetime
    task_queue: str
    on_grid: bool = True  # one of the job's fire times
    row: dict[str, Any] | None = None
    database_error: str | None = None
    server_error: str | None = None
    schedule: ServerState | None = None
    timing_since: datetime | None = None
    workflow_status: str | None = None  # the slot's workflow on the server, if any
    pollers: int | None = None  # workers polling the task queue, if known
    neighbours: tuple[datetime | None, datetime | None] = (None, None)
    # For a time that is the second of a repeated local time (fall back): the first.
    repeated_of: datetime | None = None
    # A backfill over this time whose overlap policy drops a slot that meets an open run.
    backfill: BackfillRequest | None = None
    # What the job's business calendar did to this slot ('' for nothing), and when its run
    # is due (the slot itself, or where the calendar moved it; None: the calendar skips it).
    calendar: str = ""
    run_at: datetime | None = None
    # What a timing edit decided for this slot, if one stranded it (`schedules.edits`).
    edit: dict[str, Any] | None = None
    # Who paused the schedule, if it is paused (`schedules.pauses.paused_by_text`).
    paused_by: str | None = None
    # A waiting slot's upstreams that are paused, each by whom and why.
    paused_upstreams: list[str] = field(default_factory=list)


@dataclass
class Verdict:
    ran: bool | None  # True: completed; False: did not run; None: cannot tell
    reason: str  # a short key, the same in text and --json
    text: str
    details: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return {True: 0, False: 1, None: 2}[self.ran]


def _when(ev: Evidence, instant: datetime | None = None) -> str:
    instant = instant or ev.fire
    return f"{local_text(instant, ev.job.timezone)} ({utc_text(instant)})"


def _ago(ev: Evidence, instant: datetime) -> str:
    return format_duration(max(ev.now - instant, timedelta(0)))


def explain(ev: Evidence) -> Verdict:
    """The verdict for `ev` (see the module's docstring for the order of the reasons), with
    what the job's business calendar did to the slot first among its details."""
    verdict = _explain(ev)
    if ev.calendar and verdict.reason != "calendar_skipped":
        verdict.details.insert(0, f"calendar: {ev.calendar}")
    if ev.edit is not None and ev.row is not None:
        verdict.details.insert(0, f"edit: {_edit_text(ev, ev.edit)}")
    return verdict


def _edit_text(ev: Evidence, edit: dict[str, Any]) -> str:
    what = "kept (started then)" if edit["outcome"] == "run" else "dropped"
    return (
        f"{what} by the timing edit of {_when(ev, edit['edited_at'])}: it was due "
        f"{_when(ev, edit['was_due_at'])} under the timing before; {edit['reason']}"
    )


def _edited(ev: Evidence, edit: dict[str, Any]) -> Verdict:
    """A slot a timing edit stranded, with no row: dropped by it, or kept and not run yet."""
    if edit["outcome"] == "dropped":
        return Verdict(
            False,
            "dropped_by_edit",
            _edit_text(ev, edit),
            [f"run it: {_backfill_command(ev, edit['due_at'])}"] if edit["due_at"] else [],
        )
    return Verdict(
        False,
        "kept_by_edit",
        f"no run recorded yet: {_edit_text(ev, edit)}",
        [f"if its run is gone, run it again: {_backfill_command(ev, edit['due_at'])}"],
    )


def _explain(ev: Evidence) -> Verdict:
    if not ev.on_grid and ev.row is not None:  # a manual run's own time
        return _from_row(ev, ev.row)
    if not ev.on_grid and ev.repeated_of is not None:
        return Verdict(
            False,
            "repeated_hour",
            f"the repeated local time of a fall-back night: {ev.job.id} runs once, at the first "
            f"occurrence, {_when(ev, ev.repeated_of)}",
        )
    if not ev.on_grid:
        before, after = ev.neighbours
        near = ", ".join(_when(ev, t) for t in (before, after) if t is not None)
        unread = (
            [f"cannot tell whether a manual run had this time: {ev.database_error}"]
            if ev.database_error
            else []
        )
        return Verdict(
            False,
            "not_a_fire_time",
            f"{_when(ev)} is not a fire time of {ev.job.id} ({ev.job.schedule_text}), "
            "and no run was started at it",
            ([f"the nearest fire times: {near}"] if near else []) + unread,
        )
    if ev.edit is not None and ev.row is None:
        return _edited(ev, ev.edit)
    if ev.run_at is None and ev.calendar and ev.row is None:
        return Verdict(
            False,
            "calendar_skipped",
            f"its business calendar does not run it: {ev.calendar}",
        )
    due = ev.run_at or ev.fire
    if due > ev.now and ev.row is None:
        return Verdict(
            False, "not_due", f"not due yet: it fires in {format_duration(due - ev.now)}"
        )
    if ev.row is not None:
        return _from_row(ev, ev.row)
    if ev.database_error is not None:
        return Verdict(None, "database_unreachable", f"cannot tell: {ev.database_error}")
    return _without_row(ev)


def _from_row(ev: Evidence, row: dict[str, Any]) -> Verdict:
    status, attempt, error = row["status"], row.get("attempt") or 0, row.get("error") or ""
    origin = row.get("origin") or "scheduled"
    waited = _wait_details(ev, row)
    if status == "running" and row.get("wait_status") == "waiting":
        return _waiting(ev, row)
    if status == "completed":
        took = row["finished_at"] - row["started_at"] if row.get("finished_at") else None
        counts = ", ".join(
            f"{k} {v}" for k, v in ((row.get("result") or {}).get("counts") or {}).items()
        )
        return Verdict(
            True,
            "completed",
            f"ran: completed {_ago(ev, row['finished_at'])} ago"
            + (f" in {format_duration(took)}" if took is not None else "")
            + f", attempt {attempt}, {origin} run",
            ([f"counts: {counts}"] if counts else []) + waited,
        )
    if status == "skipped":
        return Verdict(False, "skipped", f"skipped: {error or 'no reason recorded'}", waited)
    if status == "failed":
        return Verdict(False, "failed", f"failed after {attempt} attempt(s): {error}")
    if status == "compensated":
        return Verdict(False, "compensated", f"failed and was compensated: {error}")
    # running
    since = f"since {_when(ev, row['started_at'])}" if row.get("started_at") else ""
    if ev.workflow_status in (None, "RUNNING") and ev.server_error is None:
        if ev.workflow_status == "RUNNING" or (ev.workflow_status is None and ev.pollers):
            return Verdict(
                False,
                "running",
                f"still running {since}: attempt {attempt} on {row.get('holder') or 'a worker'}",
            )
    if ev.server_error is not None:
        return Verdict(None, "running", f"recorded running {since}; {ev.server_error}")
    return Verdict(
        False,
        "abandoned",
        f"recorded running {since}, but its workflow is {ev.workflow_status or 'gone'}: it "
        "stopped without finishing (terminated?)",
        [
            "backfill the slot to run it again (a workflow job resumes at its first "
            f"unfinished step): {_backfill_command(ev)}"
        ],
    )


def _waiting(ev: Evidence, row: dict[str, Any]) -> Verdict:
    """A run that waits for its upstream slots (docs/dependencies.md)."""
    deadline = row["wait_deadline"]
    when = (
        f"its deadline {_when(ev, deadline)} passed {_ago(ev, deadline)} ago (check alerts)"
        if deadline <= ev.now
        else f"deadline {_when(ev, deadline)}, in {format_duration(deadline - ev.now)}"
    )
    return Verdict(
        False,
        "waiting_for_upstream",
        f"waiting since {_when(ev, row['wait_began_at'])}: {row['wait_progress']}",
        [
            *ev.paused_upstreams,
            when,
            "an upstream slot that completes (a run, a backfill) releases it at once",
        ],
    )


def _wait_details(ev: Evidence, row: dict[str, Any]) -> list[str]:
    """What the slot's wait for its upstream slots decided, if it waited."""
    status = row.get("wait_status")
    if status is None or row.get("wait_decided_at") is None:
        return []
    waited = format_duration(max(row["wait_decided_at"] - row["wait_began_at"], timedelta(0)))
    if status == "ready" and waited == "0s":
        return ["its upstream slots had completed when it began"]
    if status == "ready":
        return [
            f"waited {waited} for its upstream slots, ready {_when(ev, row['wait_decided_at'])}"
        ]
    return [f"after waiting {waited} for its upstream slots: {row.get('wait_reason') or status}"]


def _backfill_command(ev: Evidence, fire: datetime | None = None) -> str:
    """The backfill of the fire time `fire` (default: the slot's own time)."""
    fire = fire or ev.fire
    end = utc_text(fire + timedelta(seconds=1))
    return f"python -m schedules backfill {ev.job.id} --start {utc_text(fire)} --end {end}"


def _backfill_skipped(ev: Evidence, request: BackfillRequest) -> Verdict:
    overlap = request.overlap or ev.job.overlap
    return Verdict(
        False,
        "backfill_skipped",
        f"a backfill requested {_when(ev, request.requested_at)} covered it "
        f"({utc_text(request.start)} to {utc_text(request.end)}), and the server skipped it "
        f"because of the overlap policy {overlap}: another run of the backfill was still open",
        [
            f"run it: {_backfill_command(ev)} (every slot, one at a time), or in the UI's "
            "backfill dialog choose Overlap Policy 'Buffer All'"
        ],
    )


def _without_row(ev: Evidence) -> Verdict:
    job, schedule = ev.job, ev.schedule
    if ev.server_error is not None:
        return Verdict(
            None, "temporal_unreachable", f"no run recorded; cannot tell why: {ev.server_error}"
        )
    if schedule is None or not schedule.exists:
        return Verdict(
            False,
            "no_schedule",
            f"{job.id} has no schedule on Temporal: run `python -m schedules sync`",
        )
    if ev.backfill is not None and ev.workflow_status is None:
        return _backfill_skipped(ev, ev.backfill)
    if ev.timing_since is not None and ev.fire < ev.timing_since:
        return Verdict(
            False,
            "before_timing",
            f"before the job's current timing took effect ({_when(ev, ev.timing_since)}): "
            "nothing was due then under this schedule",
        )
    if job.start_at is not None and ev.fire < job.start_at:
        return Verdict(
            False, "outside_bounds", f"before the schedule's start_at {_when(ev, job.start_at)}"
        )
    if job.end_at is not None and ev.fire > job.end_at:
        return Verdict(
            False, "outside_bounds", f"after the schedule's end_at {_when(ev, job.end_at)}"
        )
    if ev.workflow_status == "RUNNING":
        if ev.pollers == 0:
            return Verdict(
                False,
                "no_worker",
                f"Temporal started its run, but no worker polls task queue {ev.task_queue!r}: "
                "start workers (python -m worker) on that queue",
            )
        return Verdict(False, "waiting", "Temporal started its run; no worker has claimed it yet")
    if ev.workflow_status is not None:
        return Verdict(
            False,
            "no_record",
            f"its run ended ({ev.workflow_status}) without recording the slot",
            [f"see the workflow {job.id}-{utc_text(ev.fire)} in the Temporal UI"],
        )
    if schedule.paused:
        return Verdict(
            False,
            "paused",
            f"the schedule is paused by {ev.paused_by or 'someone'} "
            f"({schedule.note or 'no note'}): a paused schedule starts nothing; resume with "
            f"`python -m schedules resume {job.id}`",
        )
    counted = (
        [f"the server counts {schedule.skipped_overlap} slot(s) it skipped by overlap policy"]
        if schedule.skipped_overlap
        else []
    )
    return Verdict(
        False,
        "not_started",
        "Temporal never started it and no run has recorded it: the server (or its scheduler) "
        "was down at that time, or a run still going made it skip (overlap "
        f"{job.overlap}); the next run's catch-up ({job.catchup}) records missed times",
        counted,
    )


def as_json(ev: Evidence, verdict: Verdict) -> dict[str, Any]:
    return {
        "job": ev.job.id,
        "fire_time": {"utc": utc_text(ev.fire), "local": local_text(ev.fire, ev.job.timezone)},
        "ran": verdict.ran,
        "reason": verdict.reason,
        "text": verdict.text,
        "details": verdict.details,
    }


def format_verdict(ev: Evidence, verdict: Verdict) -> str:
    lines = [f"{ev.job.id} at {_when(ev)}: {verdict.text}"]
    lines += [f"  {line}" for line in verdict.details]
    return "\n".join(lines)
