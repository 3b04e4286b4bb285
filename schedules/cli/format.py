"""What the operator commands print: JSON-ready entries, and the text tables made from them.

Pure: every function takes the job, the server state, the execution rows and (where it
matters) the clock as arguments, so the output is unit-tested without servers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from core.text import printable
from schedules.catalog.compile import OPTIONAL_TIMING_FIELDS, memo_entry
from schedules.catalog.durations import format_duration
from schedules.catalog.model import JobSpec
from schedules.catalog.times import (
    calendar_notes,
    catalog_value,
    dst_note,
    local_iso,
    local_text,
    schedule_text,
    utc_text,
)
from schedules.server.state import ServerState
from timing import TICK, TZDATA_VERSION


def _instant(value: datetime | None, timezone: str) -> dict[str, str] | None:
    if value is None:
        return None
    return {"utc": utc_text(value), "local": local_iso(value, timezone)}


def _took(row: dict[str, Any]) -> str:
    if row.get("finished_at") is None or row.get("started_at") is None:
        return "-"
    return format_duration(max(row["finished_at"] - row["started_at"], timedelta(0)))


def execution_entry(row: dict[str, Any], timezone: str) -> dict[str, Any]:
    """One `job_executions` row as JSON-ready data (times in UTC and the job's zone)."""
    return {
        "scheduled_at": _instant(row["scheduled_at"], timezone),
        "status": row["status"],
        "attempt": row.get("attempt"),
        "origin": row.get("origin"),
        "workflow_id": row.get("workflow_id"),
        "started_at": utc_text(row["started_at"]) if row.get("started_at") else None,
        "finished_at": utc_text(row["finished_at"]) if row.get("finished_at") else None,
        "took": _took(row),
        "duplicate_runs": row.get("duplicate_runs"),
        "counts": row.get("counts"),
        "error": row.get("error"),
    }


def _server_summary(state: ServerState) -> dict[str, Any]:
    return {
        "synced": state.exists and state.managed,
        "managed": state.managed if state.exists else None,
        "paused": state.paused if state.usable else None,
        "note": state.note if state.usable else None,
    }


def list_entry(job: JobSpec, state: ServerState, last: dict[str, Any] | None) -> dict[str, Any]:
    """A job's line of `list`, as JSON-ready data."""
    return {
        "id": job.id,
        "schedule": schedule_text(job),
        "timezone": job.timezone,
        **_server_summary(state),
        # A paused schedule runs nothing: its next times are for after a resume.
        "next_run": _instant(state.next_times[0], job.timezone)
        if state.next_times and not (state.usable and state.paused)
        else None,
        "last_run": execution_entry(last, job.timezone) if last else None,
    }


def counts_text(counts: dict[str, int] | None) -> str:
    """`reminded 3, skipped 0`, or `-`: the COUNTS column of `runs`."""
    return ", ".join(f"{name} {value}" for name, value in (counts or {}).items()) or "-"


def table(header: Sequence[str], rows: list[Sequence[str]], indent: str = "") -> list[str]:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return [
        indent
        + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]


def when_text(entry: dict[str, str] | None, timezone: str) -> tuple[str, str]:
    """An instant of an entry (`{"utc": ..., "local": ...}`) as the text columns print it:
    `2026-11-20 02:30 GMT` and `2026-11-20T02:30:00Z`."""
    if entry is None:
        return "-", "-"
    instant = datetime.fromisoformat(entry["utc"])
    return local_text(instant, timezone), entry["utc"]


def _paused_text(entry: dict[str, Any]) -> str:
    if entry["paused"] is None:
        return "-"
    if not entry["paused"]:
        return "no"
    return f"yes: {printable(entry['note'])}" if entry["note"] else "yes"


def _paused_instead(note: str | None) -> str:
    """What stands where a paused job's next run would."""
    return f"paused: {printable(note)}" if note else "paused"


def format_list(entries: list[dict[str, Any]], database_ok: bool) -> str:
    """The `list` table: one line per job, next run in local time and UTC."""
    rows = []
    for e in entries:
        tz = e["timezone"]
        if not e["synced"]:
            next_local = "not synced" if e["managed"] is None else "not managed by this project"
            next_utc = "-"
        elif e["paused"]:
            next_local, next_utc = _paused_instead(e["note"]), "-"
        else:
            next_local, next_utc = when_text(e["next_run"], tz)
        if not database_ok:
            last, status = "?", "?"
        elif e["last_run"] is None:
            last, status = "-", "never ran"
        else:
            last = when_text(e["last_run"]["scheduled_at"], tz)[0]
            status = e["last_run"]["status"]
        rows.append(
            (e["id"], e["schedule"], tz, next_local, next_utc, last, status, _paused_text(e))
        )
    header = (
        "JOB",
        "SCHEDULE",
        "TIME ZONE",
        "NEXT RUN",
        "NEXT RUN (UTC)",
        "LAST RUN",
        "STATUS",
        "PAUSED",
    )
    return "\n".join(table(header, rows))


# --- describe -----------------------------------------------------------------------------


def describe_entry(
    job: JobSpec,
    state: ServerState,
    executions: list[dict[str, Any]] | None,
    database_error: str | None = None,
    record: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`describe`'s content as JSON-ready data: catalog entry, server state, executions,
    and `record`: how many executions ended how, the newest success and failure."""
    tz = job.timezone
    server: dict[str, Any] = _server_summary(state)
    if state.usable:
        server |= {
            "matches_catalog": None
            if state.definition is None
            else state.definition == memo_entry(job),
            # A paused schedule runs nothing: its next times are for after a resume.
            "next_runs": [] if state.paused else [_instant(t, tz) for t in state.next_times],
            "recent_actions": [
                {
                    "scheduled_at": _instant(a.scheduled_at, tz),
                    "started_at": utc_text(a.started_at),
                    "workflow_id": getattr(a.action, "workflow_id", None),
                    "run_id": getattr(a.action, "first_execution_run_id", None),
                }
                for a in reversed(state.recent)  # newest first
            ],
            "running": state.running,
            "num_actions": state.num_actions,
            "skipped_overlap": state.skipped_overlap,
            "missed_catchup_window": state.missed_catchup_window,
            "buffered": state.buffered,
            "buffer_dropped": state.buffer_dropped,
        }
    return {
        "job": {
            name: catalog_value(v)
            for name, v in job.model_dump().items()
            if v is not None or name not in OPTIONAL_TIMING_FIELDS
        },
        # Every fire time shown (and every UTC calendar sync writes) uses this database.
        "time_zone_database": f"tzdata {TZDATA_VERSION}",
        "server": server,
        "executions": None
        if executions is None
        else [execution_entry(row, tz) for row in executions],
        "record": None
        if record is None
        else {
            **{k: v for k, v in record.items() if k not in ("last_success", "last_failure")},
            "last_success": _instant(record["last_success"], tz),
            "last_failure": _instant(record["last_failure"], tz),
        },
        "database_error": database_error,
    }


def _field_text(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, dict):
        return json.dumps(value) if value else "-"
    return str(value)


def format_describe(entry: dict[str, Any]) -> str:
    """`describe` as text: the catalog entry, the server's state, the newest executions."""
    job, server = entry["job"], entry["server"]
    tz = job["timezone"]
    lines = [f"{job['id']}: {job['description']}" if job["description"] else job["id"], ""]
    lines.append("catalog")
    shown = [(k, v) for k, v in job.items() if k not in ("id", "description")]
    width = max(len(k) for k, _ in shown)
    lines += [f"  {k.ljust(width)}  {_field_text(v)}" for k, v in shown]
    if "time_zone_database" in entry:
        lines.append(f"  {'(time zones)'.ljust(width)}  {entry['time_zone_database']}")

    lines += ["", "server"]
    if not server["synced"]:
        lines.append(
            "  not synced: no schedule on Temporal; run `python -m schedules sync`"
            if server["managed"] is None
            else "  a schedule with this id exists but is not managed by this project"
        )
    else:
        paused = _paused_text(server)
        lines.append(f"  paused        {paused}")
        if server["matches_catalog"] is False:
            lines.append(
                "  drift         the schedule was built from a different catalog entry: "
                "see `python -m schedules sync --dry-run`"
            )
        nexts = [when_text(n, tz) for n in server["next_runs"]]
        if server["paused"]:
            lines.append(f"  next runs     none: {_paused_instead(server['note'])}")
        else:
            lines += [
                f"  {'next runs' if i == 0 else '':<12}  {local}  {utc}"
                for i, (local, utc) in enumerate(nexts)
            ] or ["  next runs     none"]
        recent = server["recent_actions"]
        lines += [
            f"  {'recent runs' if i == 0 else '':<12}  {when_text(a['scheduled_at'], tz)[0]}  "
            f"{a['workflow_id']}  started {a['started_at']}"
            for i, a in enumerate(recent)
        ] or ["  recent runs   none"]
        lines.append(f"  running       {', '.join(server['running']) or 'none'}")
        lines.append(
            f"  counts        {server['num_actions']} started, {server['skipped_overlap']} "
            f"skipped (overlap), {server['missed_catchup_window']} missed (catch-up window), "
            f"{server['buffered']} buffered, {server['buffer_dropped']} dropped (buffer full)"
        )

    record = entry.get("record")
    if record is not None:
        lines += ["", "record (PostgreSQL)"]
        shown = [("completed", "completed"), ("failed", "failed"), ("skipped", "skipped")]
        shown += [(k, k) for k in ("compensated", "running") if record.get(k)]
        lines.append("  runs          " + ", ".join(f"{record[k]} {label}" for k, label in shown))
        for key, label in (("last_success", "last success"), ("last_failure", "last failure")):
            local, utc = when_text(record[key], tz)
            lines.append(
                f"  {label:<12}  {local}  {utc}" if record[key] else f"  {label:<12}  never"
            )

    lines += ["", "executions (newest 10, from PostgreSQL)"]
    if entry["executions"] is None:
        lines.append(f"  unavailable: {entry['database_error']}")
    elif not entry["executions"]:
        lines.append("  none")
    else:
        header = ("SCHEDULED", "SCHEDULED (UTC)", "STATUS", "ATTEMPT", "ORIGIN", "TOOK", "ERROR")
        rows = [
            (
                *when_text(e["scheduled_at"], tz),
                e["status"],
                str(e["attempt"]),
                e["origin"] or "-",
                e["took"],
                (e["error"] or "")[:80],
            )
            for e in entry["executions"]
        ]
        lines += table(header, rows, indent="  ")
    return "\n".join(lines)


# --- next ---------------------------------------------------------------------------------


def next_entry(
    job: JobSpec,
    after: datetime,
    times: list[datetime],
    *,
    paused_by: str | None = None,
    note: str | None = None,
) -> dict[str, Any]:
    """`next`'s content: each run in UTC and local time, with what DST does to it; and
    whether the job is paused, by whom and why (`paused_by` and `note`: the server's pause,
    else the catalog's)."""
    # A change at `after` itself counts: `next --from T` lists a run at T.
    runs, previous = [], after - TICK
    moved = calendar_notes(job, after, times)
    for instant in times:
        notes = [n for n in (dst_note(job, instant, previous), moved.get(instant)) if n]
        runs.append(
            {
                "utc": utc_text(instant),
                "local": local_iso(instant, job.timezone),
                "note": "; ".join(notes) or None,
            }
        )
        previous = instant
    rule = job.calendar_rule
    return {
        "job": job.id,
        "schedule": schedule_text(job),
        "timezone": job.timezone,
        "calendar": None if rule is None else f"{rule.label} ({rule.calendar.version})",
        "after": utc_text(after),
        "paused": paused_by is not None or job.paused,
        "paused_by": paused_by or ("the catalog's `paused = true`" if job.paused else None),
        "note": (note if paused_by is not None else job.note) or None,
        "runs": runs,
    }


def format_next(entry: dict[str, Any]) -> str:
    """`next` as text: local time, UTC, and a DST note where one applies."""
    tz = entry["timezone"]
    after = datetime.fromisoformat(entry["after"])
    on_days = f", on {entry['calendar']}" if entry.get("calendar") else ""
    lines = [
        f"next {len(entry['runs'])} run(s) of {entry['job']} ({entry['schedule']}, {tz}{on_days}) "
        f"from {local_text(after, tz)} ({entry['after']})"
    ]
    if entry.get("paused"):
        why = f" ({printable(entry['note'])})" if entry["note"] else ""
        lines.append(
            f"  paused by {printable(entry['paused_by'])}{why}: it runs none of these until "
            "resumed; they are the times it fires once resumed"
        )
    notes = any(run["note"] for run in entry["runs"])
    header = ("LOCAL", "UTC", "NOTE" if entry.get("calendar") else "DST")
    header = header if notes else header[:2]
    rows = [(*when_text(run, tz), run["note"] or "")[: len(header)] for run in entry["runs"]]
    if rows:
        lines += table(header, rows, indent="  ")
    else:
        lines.append("  none: the job does not fire again")
    return "\n".join(lines)
