"""Run one worker replica until SIGTERM/SIGINT, then drain in-flight activities."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from activities.catchup.run_notes import RunNotesActivities
from activities.chunks.gate import set_chunk_gate
from activities.claim.executions import ExecutionActivities
from activities.dependencies.upstream import UpstreamActivities
from activities.run.begin import BeginActivities
from activities.runtime.runs import RuntimeActivities
from activities.steps.record import StepsActivities
from jobs import kind_activities, kind_workflows, runtime_work
from worker.client import connect
from worker.migrate import apply_migrations
from worker.pool import connection_pool
from worker.release import release_waiters
from worker.scrubbing import ScrubbingInterceptor
from worker.settings import Settings
from worker.telemetry import Telemetry, worker_telemetry
from workflows import (
    ChunkedJobWorkflow,
    LocalTransactionJobWorkflow,
    OneTransactionJobWorkflow,
    ScheduledJobWorkflow,
)
from workflows.runtime_run import RuntimeBatchWorkflow, RuntimeRunWorkflow

logger = logging.getLogger(__name__)


# Modules workflow code may use as they are outside Temporal's sandbox instead of importing
# them afresh into it (for every workflow run: bench/fleet.py's profile): the engine's and
# the timing package's models, the workflows' own input and result models
# (workflows/models.py: built once, not per workflow run), the workflows' helpers without
# workflow logic (workflows/details.py words the UI's details, workflows/failures.py reads
# an error chain: pure functions of their arguments) and the libraries they pull in.
PASSTHROUGH = (
    "activities",
    "core",
    "timing",
    "workflows.models",
    "workflows.details",
    "workflows.failures",
    "croniter",
    # Business calendars' holidays (timing/business.py), decoded with a job's timing.
    "holidays",
    "dateutil",
    "httpx",
    "httpcore",
    "aiosmtplib",
    "opentelemetry",
    "psycopg",
    "psycopg_pool",
    "pydantic",
    "pydantic_core",
)

# The fleet's workflow code: the workflow types' modules (each declares one type; the kinds'
# workflows' modules are added from `jobs.kind_workflows`, `workflow_runner`) and the logic
# they hold. No module state: constants, and classes whose instances each run makes. A
# worker takes them as they are, imported once. Temporal's sandbox otherwise imports a
# run's workflow module afresh for every run, with what it imports: the logic imported
# afresh was a sixth of a run's worker CPU (about 4 ms a run), and the type's own module,
# `workflow.defn` inspecting its class again, another 1.1 ms (bench/worker_cost.py's
# workflow half, 4.9 against 3.8 ms).
# The sandbox's check on them (a call to the clock, random or I/O fails the workflow
# task) runs where they change: the workflow tier and the replay tests run them sandboxed
# (`workflow_runner(strict=True)`), every run path of them, before a release.
WORKFLOW_LOGIC = (
    "workflows.local_transaction",
    "workflows.chunked",
    "workflows.one_transaction",
    "workflows.scheduled_job",
    "workflows.runtime_run",
    "workflows.job_run",
    "workflows.attempts",
    "workflows.dependencies",
    "workflows.run_notes",
    "workflows.steps",
)


def workflow_runner(strict: bool = False) -> SandboxedWorkflowRunner:
    """The sandbox workers run workflow code in; `strict`: with the workflow logic
    sandboxed too (`WORKFLOW_LOGIC`), as the workflow tier and the replay tests run it."""
    kinds = tuple(kind.__module__ for kind in kind_workflows())
    passthrough = PASSTHROUGH if strict else (*PASSTHROUGH, *WORKFLOW_LOGIC, *kinds)
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*passthrough)
    )


def build_activities(pool: AsyncConnectionPool, settings: Settings) -> list:
    """Every activity the fleet serves, bound to one connection pool."""
    executions = ExecutionActivities(pool)
    steps = StepsActivities(pool)
    runtime = RuntimeActivities(pool, runtime_work(pool, settings))
    notes = RunNotesActivities()
    upstream = UpstreamActivities(pool)
    return [
        BeginActivities(pool).begin_run,
        notes.backfill_skips,
        notes.outcome_attribute,
        executions.claim_execution,
        executions.record_failure,
        executions.attempt_took_over,
        steps.finish_steps,
        steps.settle_steps,
        runtime.begin_runtime_run,
        runtime.run_runtime_batch,
        upstream.check_upstream,
        upstream.await_upstream,
        upstream.cancel_wait,
        *kind_activities(pool, settings),
    ]


def fleet_workflows() -> list[type]:
    """Every workflow type the fleet runs (the replay tests replay with the same)."""
    return [
        ScheduledJobWorkflow,
        LocalTransactionJobWorkflow,
        ChunkedJobWorkflow,
        OneTransactionJobWorkflow,
        RuntimeRunWorkflow,
        RuntimeBatchWorkflow,
        *kind_workflows(),
    ]


def build_worker(
    client: Client, settings: Settings, pool: AsyncConnectionPool, task_queue: str | None = None
) -> Worker:
    """A worker of `task_queue` (default: the fleet's own). Every queue of the fleet is
    served by the same workflows and activities; what runs on each is what its schedules
    start (`core.queues`)."""
    return Worker(
        client,
        task_queue=task_queue or settings.temporal_task_queue,
        workflows=fleet_workflows(),
        workflow_runner=workflow_runner(),
        activities=build_activities(pool, settings),
        max_concurrent_activities=settings.worker_max_concurrent_activities,
        max_concurrent_local_activities=settings.worker_max_concurrent_local_activities,
        max_concurrent_workflow_tasks=settings.worker_max_concurrent_workflow_tasks,
        max_cached_workflows=settings.worker_max_cached_workflows,
        graceful_shutdown_timeout=settings.graceful_shutdown,
        identity=settings.worker_identity,
        interceptors=[ScrubbingInterceptor()],
    )


def freeze_startup_heap() -> None:
    """Take what the worker built at start out of the cyclic garbage collector's walks:
    collect once, then freeze the survivors (`gc.freeze`).

    A started worker holds about 110,000 objects (its modules, the SDK's, the kinds' models)
    that live as long as the process. Every full collection walked all of them, looking for
    garbage among the runs' objects, a small part of the heap: in bursts of runs, a worker's
    full collections took 0.93 ms of CPU a run, 0.54 ms frozen, each a pause of every run
    the worker holds (bench/results/2026-12-03.md, `bench/fleet.py --gc-probe`). Frozen, they are
    skipped; the objects made after are collected as before, and reference counting frees
    the frozen ones as always (only a cycle among them would stay)."""
    gc.collect()
    gc.freeze()


async def run_worker(settings: Settings, stop: asyncio.Event | None = None) -> None:
    """Serve the task queue, traced and measured (`worker.telemetry`), until stopped."""
    async with worker_telemetry(settings) as telemetry:
        await _serve(settings, stop, telemetry)


async def _serve(settings: Settings, stop: asyncio.Event | None, telemetry: Telemetry) -> None:
    """Serve the task queues of the worker's role until `stop` is set or SIGTERM/SIGINT
    arrives.

    On stop the worker polls no more and gives in-flight activities
    `WORKER_GRACEFUL_SHUTDOWN_SECONDS` to finish before cancelling them.
    """
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    set_chunk_gate(settings.worker_test_chunk_gate)
    conninfo = settings.database_conninfo
    if settings.migrate_on_start:
        await asyncio.to_thread(apply_migrations, conninfo)
    else:  # the database answers before the worker polls, or it stops saying where it is
        await (await AsyncConnection.connect(conninfo)).close()
    client = await connect(settings, interceptors=telemetry.interceptors, runtime=telemetry.runtime)
    async with connection_pool(settings) as pool:
        # Bounded like each connection: one attempt and a retry, then the worker gives up.
        await pool.wait(timeout=2 * settings.database_connect_timeout_seconds)
        workers = [build_worker(client, settings, pool, q) for q in settings.task_queues()]
        # Waiting runs are signalled when their upstream slots settle (docs/dependencies.md).
        releasing = asyncio.create_task(release_waiters(conninfo, client))
        async with contextlib.AsyncExitStack() as running:
            for worker in workers:
                await running.enter_async_context(worker)
            freeze_startup_heap()
            logger.info(
                "worker ready",
                extra={
                    "task_queue": ",".join(settings.task_queues()),
                    "role": settings.worker_role,
                    "namespace": settings.temporal_namespace,
                },
            )
            await stop.wait()
            releasing.cancel()
            logger.info(
                "stopping: no new tasks; draining in-flight activities for up to %ss",
                settings.worker_graceful_shutdown_seconds,
            )
            # Every queue drains at once, within the one grace period.
            await asyncio.gather(*(worker.shutdown() for worker in workers))
    logger.info("worker stopped")
