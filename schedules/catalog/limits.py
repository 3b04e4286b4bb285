"""Temporal's limits on a schedule, checked before sync sends anything.

A schedule the server refuses fails sync after earlier writes of the same sync happened; a
schedule it takes but barely (a run input near the blob limit) fails or warns on every
run. So the catalog and its compiled schedules are held to these limits first. The values
are the server's defaults (temporalio/temporal `common/dynamicconfig/constants.go`, and
`service/frontend/workflow_handler.go` `CreateSchedule`), measured on the bundled 1.32 dev
server where noted:

- `limit.maxIDLength` = 1000 bytes, for every workflow id. A job id is the schedule id,
  and the engine builds longer ids from it: the scheduler's own workflow
  `temporal-sys-scheduler:<job id>` (measured: a 977-character id is taken, 978 is refused
  with "WorkflowId exceeds maximum allowed length (1001/1000)"), each run
  `<job id>-2009-11-10T23:00:00Z`, and a workflow job's steps child
  `<job id>-2009-11-10T23:00:00Z/steps` (`workflows/steps.py`), the longest: a job id is
  held to what that one leaves, 973 characters, whatever its kind (a job may change kind).
- `limit.blobSize.error` = 2 MiB per payload (the scheduler's input holds the whole
  schedule: refused with "Blob data size exceeds limit"), `limit.blobSize.warn` = 512 KiB.
  gRPC refuses a request over 4 MiB (measured: a 1.5 MB pause note makes a 4.5 MB request).
- `limit.userMetadataSummarySize` = 400 and `limit.userMetadataDetailsSize` = 20,000
  bytes: the UI summary and details of a workflow. Newer servers enforce them; the summary
  and details sync derives from the description and owner are cut to fit (`fit`).

Every run carries the job's run input (`JobRun`, the catalog entry included) in its start
event and its params in each activity input, so sync holds a schedule to the *warning*
limit, 512 KiB: a quarter of what the server refuses, however many copies a run's history
holds.
"""

from __future__ import annotations

import json
from typing import Any

from temporalio.client import Schedule, ScheduleActionStartWorkflow

from core.payloads import data_converter
from workflows.models import STEPS_ID_SUFFIX

MAX_ID_LENGTH = 1000  # limit.maxIDLength
SCHEDULER_WORKFLOW_PREFIX = "temporal-sys-scheduler:"
RUN_ID_SUFFIX = "-2009-11-10T23:00:00Z"  # Temporal's: `<schedule id>-<scheduled time>`
# The ids the engine builds from a job id, longest last; a job id must leave room for each.
_BUILT_IDS = (
    SCHEDULER_WORKFLOW_PREFIX + "{job}",
    "{job}" + RUN_ID_SUFFIX,
    "{job}" + RUN_ID_SUFFIX + STEPS_ID_SUFFIX,
)
MAX_JOB_ID = MAX_ID_LENGTH - max(len(built.format(job="")) for built in _BUILT_IDS)  # 973
BLOB_SIZE_ERROR = 2 * 1024 * 1024  # limit.blobSize.error
BLOB_SIZE_WARN = 512 * 1024  # limit.blobSize.warn
MAX_SCHEDULE_BYTES = BLOB_SIZE_WARN
MAX_SUMMARY_BYTES = 400  # limit.userMetadataSummarySize
MAX_DETAILS_BYTES = 20_000  # limit.userMetadataDetailsSize
# The schedule note the UI shows on the schedule page (compile.intent_note); no server limit
# of its own below the schedule's, kept short to read at a glance.
MAX_NOTE_BYTES = 1_000

# The catalog fields whose size a person controls, as named in the problem.
_SIZED_FIELDS = ("description", "owner", "note", "params")


def fit(text: str, limit: int) -> str:
    """`text` cut (with "…") so that its payload stays within `limit` bytes: its UTF-8 and
    the payload's encoding metadata (`json/plain`, under 64 bytes)."""
    budget = limit - 64
    if len(text.encode()) <= budget:
        return text
    cut = text.encode()[: budget - len("…".encode())].decode(errors="ignore")
    return cut + "…"


def id_problem(job_id: str) -> str | None:
    """Why Temporal would refuse `job_id` or an id the engine builds from it, or None."""
    size = len(job_id.encode())
    if size > MAX_JOB_ID:
        return (
            f"is {size} characters; a job id may have at most {MAX_JOB_ID}, so that the "
            f"longest id built from it, a workflow job's steps child "
            f"'<id>{RUN_ID_SUFFIX}{STEPS_ID_SUFFIX}', fits Temporal's limit.maxIDLength "
            f"({MAX_ID_LENGTH})"
        )
    return None


def schedule_bytes(schedule: Schedule) -> int:
    """About how many bytes the schedule takes on the wire: the run input, the action's
    memo (the catalog entry) and the UI metadata as the worker's data converter encodes
    them, the spec, policy and state."""
    action = schedule.action
    assert isinstance(action, ScheduleActionStartWorkflow)
    converter = data_converter.payload_converter
    memo = list((action.memo or {}).values())
    payloads = converter.to_payloads(
        [*action.args, *memo, action.static_summary or "", action.static_details or ""]
    )
    spec = schedule.spec._to_proto().ByteSize()  # the SDK's own encoding of it
    note = len((schedule.state.note or "").encode())
    return sum(p.ByteSize() for p in payloads) + spec + note + len(action.id) + 256


def size_problem(definition: dict[str, Any], schedule: Schedule) -> str | None:
    """Why the compiled `schedule` is too large for Temporal, naming its largest fields."""
    size = schedule_bytes(schedule)
    if size <= MAX_SCHEDULE_BYTES:
        return None
    sized = sorted(
        (
            (len(json.dumps(definition.get(name), default=str).encode()), name)
            for name in _SIZED_FIELDS
        ),
        reverse=True,
    )
    largest = ", ".join(f"{name} {n:,} bytes" for n, name in sized[:2] if n > 2)
    return (
        f"its schedule is {size:,} bytes, more than the {MAX_SCHEDULE_BYTES:,} a schedule may "
        f"take (Temporal warns above {BLOB_SIZE_WARN:,} and refuses {BLOB_SIZE_ERROR:,} per "
        f"payload); largest: {largest}"
    )
