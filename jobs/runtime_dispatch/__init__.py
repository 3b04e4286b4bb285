"""The dispatcher of runtime schedules: one catalog job per shard (`runtime-dispatch-N`,
every minute) whose run dispatches its shard's due slots (`activities.dispatch`)."""

from activities.kinds import JobKind
from jobs.runtime_dispatch.activities import DispatchActivities

KINDS = (JobKind("runtime-dispatch", DispatchActivities, activity="dispatch_runtime_shard"),)
