"""The dispatcher of runtime schedules: one catalog job per shard (`runtime-dispatch-N`,
every minute) whose run dispatches its shard's due slots (`activities.runtime.dispatch`).

Its runs use the fleet's `dispatch` task queue, served by workers that run only ticks
(WORKER_ROLE=dispatch, or `all`): a herd's batches, started by a tick on the `jobs` queue,
never keep the next ticks from a worker."""

from activities.run.kinds import JobKind
from jobs.runtime_dispatch.activities import DispatchActivities

KINDS = (
    JobKind(
        "runtime-dispatch",
        DispatchActivities,
        activity="dispatch_runtime_shard",
        settings=True,  # the fleet's task queue, where it starts the slots' runs
        queue="dispatch",
    ),
)
