"""Runtime schedules: schedules an application creates at runtime (one per customer, say),
kept in PostgreSQL as the one source of truth and dispatched by a few dispatcher jobs.

The Python API an application calls; each function takes a connection string or a psycopg
`AsyncConnection` (and, where time matters, a `clock`). `python -m schedules tenants ...`
is the same on the command line. See docs/runtime-schedules.md.
"""

from activities.runtime.models import ledger_name
from activities.runtime.models import slot_workflow_id as workflow_id
from schedules.tenants.api import (
    Outcome,
    Page,
    changes,
    create,
    delete,
    find,
    get,
    list_schedules,
    pause,
    resume,
    update,
)
from schedules.tenants.apply import ApplyReport, apply
from schedules.tenants.bulk import ImportReport, export, import_lines
from schedules.tenants.fires import FireTime, next_fire_at, next_fire_times
from schedules.tenants.kinds import RuntimeKind, register_kind, runtime_kind, runtime_kinds
from schedules.tenants.limits import (
    TenantLimits,
    clear_limits,
    limits,
    set_limits,
    set_pause_after_failures,
)
from schedules.tenants.model import BUCKETS, Definition, Schedule
from schedules.tenants.notices import NoticeChannels, clear_notices, notices, set_notices
from schedules.tenants.quota import Quotas
from schedules.tenants.slots import (
    Explanation,
    Requested,
    backfill,
    explain,
    next_times,
    paused_text,
    runs,
    trigger,
)

__all__ = [
    "BUCKETS",
    "ApplyReport",
    "Definition",
    "Explanation",
    "FireTime",
    "ImportReport",
    "NoticeChannels",
    "Outcome",
    "Page",
    "Quotas",
    "Requested",
    "RuntimeKind",
    "Schedule",
    "TenantLimits",
    "apply",
    "backfill",
    "changes",
    "clear_limits",
    "clear_notices",
    "create",
    "delete",
    "explain",
    "export",
    "find",
    "get",
    "import_lines",
    "ledger_name",
    "limits",
    "list_schedules",
    "next_fire_at",
    "next_fire_times",
    "next_times",
    "notices",
    "pause",
    "paused_text",
    "register_kind",
    "resume",
    "runs",
    "runtime_kind",
    "runtime_kinds",
    "set_limits",
    "set_notices",
    "set_pause_after_failures",
    "trigger",
    "update",
    "workflow_id",
]
