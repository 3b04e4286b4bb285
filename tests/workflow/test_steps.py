"""A workflow job's steps on stand-in activities (`JobSteps`, run by `ScheduledJobWorkflow`
as a child workflow): in order, a batching step called until done, completion recorded
once; a step that fails for good undoes what ran, newest first; a cancelled run waits for
its step to stop, compensates and stays cancelled."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import CancelledError

from tests.workflow.runs import SLOT, run_to_end, stand_in_worker, start, steps_job
from tests.workflow.stand_ins import StandIns
from workflows.steps import COMPENSATED


def steps_called(stand_ins: StandIns) -> list[str]:
    return [name for name in stand_ins.names() if name not in ("begin_run", "claim")]


async def test_steps_run_in_order_and_the_run_completes_once(workflow_env):
    stand_ins = StandIns()
    result = await run_to_end(workflow_env, stand_ins, steps_job())
    assert result.outcome == "completed"
    assert result.counts == {"open_batch.opened": 1, "process.items": 10, "publish.published": 1}
    # `process` works in two batches; every step gets the first one's output.
    assert steps_called(stand_ins) == [
        "open_batch",
        "process",
        "process",
        "publish",
        "finish_steps",
    ]
    assert all(call.inputs == {"batch": 7} for call in stand_ins.of("publish"))
    (finish,) = stand_ins.of("finish_steps")
    assert finish.steps == ["open_batch", "process", "publish"]
    assert finish.run_id == stand_ins.of("begin_run")[0].claim.run_id  # the slot's holder


async def test_a_step_that_fails_for_good_is_compensated_newest_first(workflow_env):
    stand_ins = StandIns(fail_step="publish")
    with pytest.raises(WorkflowFailureError) as failed:
        await run_to_end(workflow_env, stand_ins, steps_job())
    assert "step 3 of 3 did not finish (publish refused); compensated open_batch" in str(
        failed.value.cause
    )
    assert steps_called(stand_ins) == [
        "open_batch",
        "process",
        "process",
        "publish",
        "undo:open_batch",
        "settle_steps",
        "record_failure",
    ]
    (undo,) = stand_ins.of("undo:open_batch")
    assert undo.inputs == {"batch": 7}  # what the step put out, for its compensation
    (settled,) = stand_ins.of("settle_steps")
    assert (settled.status, settled.compensated) == ("compensated", ["open_batch"])
    assert settled.counts == {"open_batch.opened": 1, "process.items": 10}
    assert COMPENSATED in repr(failed.value.cause.cause.cause)


async def test_a_cancelled_run_stops_its_step_compensates_and_stays_cancelled(workflow_env):
    stand_ins = StandIns(hang_step="process")
    async with stand_in_worker(workflow_env, stand_ins) as task_queue:
        handle = await start(workflow_env, task_queue, steps_job(heartbeat_seconds=10), SLOT)
        await asyncio.wait_for(stand_ins.started.wait(), timeout=60)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
    assert isinstance(failed.value.cause, CancelledError)
    assert steps_called(stand_ins) == ["open_batch", "process", "undo:open_batch", "settle_steps"]
    (settled,) = stand_ins.of("settle_steps")
    assert settled.status == "compensated" and "the run was cancelled" in settled.error
    assert "record_failure" not in stand_ins.names()  # the steps settled it
