"""The dispatcher of runtime schedules: one catalog job per shard (`runtime-dispatch-N`,
every minute) whose run dispatches its shard's due slots (`activities.dispatch`)."""

from activities.kinds import JobKind
from jobs.runtime_dispatch.activities import DispatchActivities, DispatchParams

KINDS = (
    JobKind(
        name="runtime-dispatch",
        activity="dispatch_runtime_shard",
        params=DispatchParams,
        description="start the due slots of one shard of the runtime schedules",
        owner=DispatchActivities,
    ),
)
