"""The fleet's task queues, by what runs on them.

- `jobs`: every job's runs, on the queue named TEMPORAL_TASK_QUEUE;
- `dispatch`: the runs of the dispatcher kinds only (the runtime schedules' ticks), on
  `<TEMPORAL_TASK_QUEUE>-dispatch`, served by workers of their own (WORKER_ROLE), so a
  dispatcher is never starved by the work it has just started.

A job kind names its queue (`activities.run.kinds.JobKind.queue`); sync compiles each job's
schedule onto it, and a worker serves the queues of its role.
"""

from __future__ import annotations

from typing import Literal

Queue = Literal["jobs", "dispatch"]
QUEUES: tuple[Queue, ...] = ("jobs", "dispatch")


def task_queue(fleet: str, queue: Queue) -> str:
    """The name of the fleet's task queue `queue`, the fleet's own being `fleet`."""
    return fleet if queue == "jobs" else f"{fleet}-{queue}"
