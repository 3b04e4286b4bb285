"""What one run costs in resources, for `bench/fleet.py`'s `cost` case.

Counted, not timed, so a loaded machine moves them little:

- from each sampled run's history: events, workflow tasks, activity tasks, local
  activities (marker events), payload bytes in (the workflow's input and memo, activities' inputs)
  and out (activities' results, markers, the workflow's result);
- from PostgreSQL, as deltas over the side's window: transactions of the side's database
  (`pg_stat_database`) and statements (`pg_stat_statements`, which the bench preloads);
- from `/proc`, as deltas: CPU seconds of the Temporal server, of the side's worker
  processes and of PostgreSQL (every backend alive plus those already reaped by the
  postmaster);
- from the Temporal server's own metrics (`service_requests`), as deltas: the calls its
  frontend served (polls apart: an idle worker's polls are no run's), and the activity
  tasks it dispatched through matching, those that did not start eagerly on the worker
  that scheduled them.
"""

from __future__ import annotations

import os
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from prometheus_client.parser import text_string_to_metric_families
from temporalio.api.enums.v1 import EventType

_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int, children: bool = False) -> float:
    """User + system CPU seconds of process `pid` (and of its reaped children)."""
    try:
        return _stat_seconds(Path(f"/proc/{pid}/stat").read_text(), children)
    except (FileNotFoundError, ProcessLookupError):
        return 0.0


def _stat_seconds(stat: str, children: bool = False) -> float:
    """User + system CPU seconds in a /proc `stat` line (of a process or a thread)."""
    # Fields after the command: state is [0]; utime [11], stime [12], cutime [13], cstime [14].
    fields = stat.rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / _TICKS


# The kinds of a worker's threads `thread_cpu_seconds` tells apart.
THREAD_KINDS = ("event_loop", "python_threads", "sdk_core")


def thread_cpu_seconds(pid: int) -> dict[str, float]:
    """CPU seconds of process `pid`'s live threads, by kind: `event_loop` (the main thread:
    asyncio, the activities, the SDK's Python side), `python_threads` (threads Python
    started: the SDK's workflow activations run in them) and `sdk_core` (the SDK core's
    Rust threads: gRPC, protobuf, its own metrics)."""
    parts = dict.fromkeys(THREAD_KINDS, 0.0)
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except (FileNotFoundError, ProcessLookupError):
        return parts
    for task in tasks:
        try:
            stat = (task / "stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        seconds = _stat_seconds(stat)
        if task.name == str(pid):
            parts["event_loop"] += seconds
        elif name.startswith("python"):  # Python's threads keep the process's name
            parts["python_threads"] += seconds
        else:
            parts["sdk_core"] += seconds
    return parts


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds of `root`, its live descendants, and the children it reaped."""
    total = cpu_seconds(root, children=True)
    for pid in _descendants(root):
        total += cpu_seconds(pid)
    return total


def _descendants(root: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def server_calls(metrics_url: str) -> dict[str, float]:
    """The Temporal server's calls so far: `frontend` (every call its frontend served but
    polls), `matched_activities` (activity tasks its matching service dispatched: an
    activity started eagerly, on the worker whose workflow task scheduled it, is not one),
    and the workflow tasks matching wrote to a queue's backlog, found no poll waiting for
    them (`backlogged_sticky`: a run's later tasks, for the worker that has it cached;
    `backlogged_normal`: its first, for any worker): each is persisted and read back."""
    with urllib.request.urlopen(metrics_url, timeout=10) as response:
        text = response.read().decode()
    calls = {
        "frontend": 0.0,
        "matched_activities": 0.0,
        "backlogged_sticky": 0.0,
        "backlogged_normal": 0.0,
    }
    for family in text_string_to_metric_families(text):
        if family.name == "tasks_added":
            for sample in family.samples:
                labels = sample.labels
                if (
                    labels.get("task_type") == "Workflow"
                    and labels.get("task_add_result") == "backlog"
                    and labels.get("forwarded") == "false"
                ):
                    sticky = labels.get("partition") == "__sticky__"
                    calls["backlogged_sticky" if sticky else "backlogged_normal"] += sample.value
            continue
        if family.name != "service_requests":
            continue
        for sample in family.samples:
            service, operation = sample.labels.get("service_name"), sample.labels.get("operation")
            if service == "frontend" and not operation.startswith("Poll"):
                calls["frontend"] += sample.value
            elif service == "matching" and operation == "AddActivityTask":
                calls["matched_activities"] += sample.value
    return calls


def postmaster_pid(data_dir: Path) -> int:
    return int((data_dir / "postmaster.pid").read_text().split()[0])


def pg_counts(admin_url: str, database: str) -> tuple[int, int, int]:
    """In `database` so far: (transactions committed or rolled back, statements executed,
    transactions that configured a new pooled connection: no run's, `worker/sql/pool.sql`).

    pg_stat_database counts every transaction, an autocommitted statement's too; the
    workers' `configure` commits its own, counted here by its statement."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        xacts = conn.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s",
            (database,),
        ).fetchone()[0]
        calls, configures = conn.execute(
            "SELECT coalesce(sum(calls), 0),"
            " coalesce(sum(calls) FILTER (WHERE query LIKE %s), 0)"
            " FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid"
            " WHERE d.datname = %s",
            ("%idle_in_transaction_session_timeout%", database),
        ).fetchone()
    return int(xacts), int(calls), int(configures)


@dataclass
class HistoryCost:
    """What one run's history holds."""

    events: int = 0
    workflow_tasks: int = 0
    activities: int = 0
    local_activities: int = 0
    payload_in: int = 0
    payload_out: int = 0
    kinds: dict[str, int] = field(default_factory=dict)


def _size(payloads) -> int:
    return sum(len(p.data) + sum(len(k) + len(v) for k, v in p.metadata.items()) for p in payloads)


def history_cost(history) -> HistoryCost:
    """Count a run's events, tasks and payload bytes (its child workflows not included)."""
    cost = HistoryCost()
    for event in history.events:
        cost.events += 1
        name = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
        cost.kinds[name] = cost.kinds.get(name, 0) + 1
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            cost.workflow_tasks += 1
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            started = event.workflow_execution_started_event_attributes
            # The memo too: a schedule's action memo (the catalog entry) is copied to each run.
            cost.payload_in += _size(started.input.payloads) + _size(started.memo.fields.values())
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            cost.activities += 1
            cost.payload_in += _size(event.activity_task_scheduled_event_attributes.input.payloads)
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            cost.payload_out += _size(
                event.activity_task_completed_event_attributes.result.payloads
            )
        elif kind == EventType.EVENT_TYPE_MARKER_RECORDED:
            attrs = event.marker_recorded_event_attributes
            if attrs.marker_name == "core_local_activity":
                cost.local_activities += 1
            cost.payload_out += sum(_size(p.payloads) for p in attrs.details.values())
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
            cost.payload_out += _size(
                event.workflow_execution_completed_event_attributes.result.payloads
            )
    return cost
