"""`python -m worker health`: is a worker in this container polling its task queues?"""

from __future__ import annotations

import socket

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

from worker.client import connect
from worker.settings import Settings


async def polling_here(settings: Settings, hostname: str | None = None) -> bool:
    """True while a worker on this host is among the activity pollers of every task queue
    of its role (WORKER_ROLE: the fleet's, its dispatch queue, or both).

    Workers keep the SDK's default identity `<pid>@<hostname>` (unless WORKER_IDENTITY is
    set, in which case that identity is looked for).
    """
    hostname = hostname or socket.gethostname()
    client = await connect(settings)
    for task_queue in settings.task_queues():
        queue = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=settings.temporal_namespace,
                task_queue=TaskQueue(name=task_queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
            )
        )
        if settings.worker_identity:
            here = any(p.identity == settings.worker_identity for p in queue.pollers)
        else:
            here = any(p.identity.endswith("@" + hostname) for p in queue.pollers)
        if not here:
            return False
    return True
