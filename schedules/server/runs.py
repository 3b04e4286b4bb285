"""Wait for the runs a trigger or a backfill started, and learn how each ended.

A run is found by its workflow id, `<job>-<scheduled time>Z`: a trigger knows its run's id
and run id from the schedule's recent actions; a backfill knows its slots, and takes as a
slot's run the first run of that id that was not there before the request (a slot run
earlier keeps its id, and its old run must not be mistaken for the new one). Each run's
workflow result (`JobRunResult`) gives its outcome, origin and counts; a failed run's
failure gives its error. Everything is bounded by one deadline: what has not finished by
then is reported as still running, and goes on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from temporalio.client import Client, WorkflowFailureError

from core import redact
from core.aio import gather_by
from core.ids import workflow_id as slot_workflow_id
from schedules.progress import QUIET, Progress
from schedules.server.found import workflow_or_none
from schedules.server.retry import Retry
from workflows.models import JobRunResult

# How long `--wait` waits for the runs, unless --timeout says otherwise.
DEFAULT_WAIT_SECONDS = 900.0
_POLL = 0.25  # seconds between looks for a backfilled slot's run to start
_CONCURRENCY = 16
_ERROR_CHARS = 300
# Outcomes of a run that did what was asked: ran, or correctly did nothing.
_OK = {"completed", "already completed", "skipped", "superseded"}


@dataclass
class RunOutcome:
    """How one run the command started ended (or that it had not, by the deadline)."""

    slot: datetime
    workflow_id: str
    origin: str  # scheduled | catch-up | manual | backfill | direct
    status: str  # completed, already completed, skipped, superseded, failed ... still running
    took: timedelta | None = None
    counts: dict[str, int] = field(default_factory=dict)
    reason: str | None = None  # why a run did nothing, or the error of a failed one
    caught_up: int = 0

    @property
    def ok(self) -> bool:
        return self.status in _OK

    @property
    def finished(self) -> bool:
        return self.status not in ("still running", "not started")


def _remaining(deadline: float) -> float:
    return max(deadline - time.monotonic(), 0.0)


def _ended(status_name: str | None) -> str:
    return {
        "CANCELED": "cancelled",
        "TERMINATED": "terminated",
        "TIMED_OUT": "timed out",
    }.get(status_name or "", "failed")


async def _took(
    client: Client, retry: Retry, workflow_id: str, run_id: str | None
) -> tuple[timedelta | None, str | None]:
    """How long the run took (start to close) and how it closed, from the server."""
    described = await retry(
        lambda: client.get_workflow_handle(workflow_id, run_id=run_id).describe()
    )
    took = None
    if described.close_time is not None:
        took = max(described.close_time - described.start_time, timedelta(0))
    return took, described.status.name if described.status is not None else None


async def wait_for_run(
    client: Client,
    workflow_id: str,
    run_id: str | None,
    slot: datetime,
    origin: str,
    deadline: float,
    *,
    retry: Retry | None = None,
    result_type: type = JobRunResult,
) -> RunOutcome:
    """Wait (until `deadline`, a `time.monotonic()` value) for one run's result: a catalog
    job's run (`JobRunResult`), or a runtime schedule's (`result_type`
    `RuntimeRunResult`: no origin nor catch-up in it, `origin` stands). `run_id` None:
    the newest run of `workflow_id`."""
    retry = retry or Retry.for_client(client)
    handle = client.get_workflow_handle(workflow_id, run_id=run_id, result_type=result_type)
    outcome = RunOutcome(slot=slot, workflow_id=workflow_id, origin=origin, status="")
    try:
        result: JobRunResult = await asyncio.wait_for(
            retry(lambda: handle.result(follow_runs=False)), _remaining(deadline)
        )
    except TimeoutError:
        outcome.status = "still running"
        return outcome
    except WorkflowFailureError as err:
        cause = err.cause
        while cause is not None and cause.cause is not None and not str(cause):
            cause = cause.cause
        outcome.took, status = await _took(client, retry, workflow_id, run_id)
        outcome.status = _ended(status)
        text = str(cause) if cause is not None and str(cause) else str(err)
        outcome.reason = redact.scrub(text.strip().replace("\n", " "))[:_ERROR_CHARS]
        return outcome
    outcome.took, _ = await _took(client, retry, workflow_id, run_id)
    outcome.slot = result.scheduled_at
    outcome.origin = getattr(result, "origin", origin)
    outcome.status = result.outcome.replace("_", " ")
    outcome.counts = dict(result.counts)
    outcome.reason = result.reason
    outcome.caught_up = len(getattr(result, "caught_up", ()))
    return outcome


async def _run_id(client: Client, retry: Retry, workflow_id: str) -> str | None:
    """The run id of the newest run with this workflow id, or None if there is none."""

    async def call() -> str | None:
        described = await workflow_or_none(client, workflow_id)
        return described.run_id if described else None

    return await retry(call)


async def run_ids(
    client: Client, workflow_ids: list[str], *, retry: Retry | None = None
) -> dict[str, str | None]:
    """`_run_id` of each workflow id, a bounded number at a time: taken before a backfill
    is requested, so its runs can be told from earlier runs of the same slots."""
    retry = retry or Retry.for_client(client)
    return await gather_by(workflow_ids, lambda w: _run_id(client, retry, w), limit=_CONCURRENCY)


async def wait_for_slots(
    client: Client,
    job_id: str,
    slots: list[datetime],
    before: dict[str, str | None],
    timeout: float,
    progress: Progress = QUIET,
    *,
    report: Callable[[RunOutcome], None] | None = None,
    retry: Retry | None = None,
) -> list[RunOutcome]:
    """Wait for the run of each backfilled slot in turn (they run one after another),
    telling `report` of each as its run ends (`progress` counts them); the slots not reached by
    the deadline are reported as not finished."""
    retry = retry or Retry.for_client(client)
    deadline = time.monotonic() + timeout
    outcomes = []
    progress.phase("backfill", len(slots))
    for slot in slots:
        workflow_id = slot_workflow_id(job_id, slot)
        outcome = RunOutcome(slot=slot, workflow_id=workflow_id, origin="backfill", status="")
        run_id = None
        while _remaining(deadline) > 0:
            current = await _run_id(client, retry, workflow_id)
            if current is not None and current != before.get(workflow_id):
                run_id = current
                break
            await asyncio.sleep(min(_POLL, _remaining(deadline)))
        if run_id is None:
            outcome.status = "not started"
        else:
            outcome = await wait_for_run(
                client, workflow_id, run_id, slot, "backfill", deadline, retry=retry
            )
        outcomes.append(outcome)
        if report is not None:
            report(outcome)
        progress.advance()
    progress.close()
    return outcomes
