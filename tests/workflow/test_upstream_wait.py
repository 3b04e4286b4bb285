"""Every branch of a slot's wait for its upstream slots (`workflows.dependencies`), in
`ScheduledJobWorkflow` on stand-in activities: ready at once, released by a signal, by the
poll, by a deadline; skipped or run anyway by a policy; cancelled while waiting; and a job
without dependencies that never asks."""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import CancelledError

from activities.common.dependency_models import UPSTREAM_SETTLED_SIGNAL, Dependency
from tests.helpers import assert_eventually
from tests.workflow.runs import SLOT, job, stand_in_worker, start
from tests.workflow.stand_ins import WORK, StandIns
from tests.workflow.upstream_stand_ins import UpstreamStandIns, answer
from workflows.dependencies import DEPENDS_PATCH


def dependent(within: timedelta = timedelta(hours=1), on_failure: str = "wait"):
    upstream = Dependency(job="up", slots="window", within=within, on_failure=on_failure)
    return job(depends_on=[upstream])


async def patched(handle) -> bool:
    """Whether the run's history records the dependency patch (a marker)."""
    events = (await handle.fetch_history()).events
    return any(DEPENDS_PATCH.encode() in event.SerializeToString() for event in events)


async def run(env, upstream: UpstreamStandIns, run_input, then=None):
    """Run one job run to its end; `then(handle)` acts once a check said "waiting"."""
    stand_ins = StandIns()
    async with stand_in_worker(env, stand_ins, upstream.activities()) as task_queue:
        handle = await start(env, task_queue, run_input)
        if then is not None:
            await upstream.waiting.wait()
            await then(handle)
        return stand_ins, handle, await handle.result()


async def test_upstream_done_before_the_slot_costs_one_local_check(workflow_env):
    upstream = UpstreamStandIns(checks=[answer("ready", "upstream ready: up: 2 of 2")])
    stand_ins, handle, result = await run(workflow_env, upstream, dependent())
    assert result.outcome == "completed" and stand_ins.names().count(WORK) == 1
    assert upstream.names() == ["check_upstream"]  # no poll was scheduled
    (wait,) = [arg for name, arg in upstream.calls]
    assert (wait.scheduled_at, wait.execution_id, wait.job_name) == (SLOT, 1, "stand-in-job")
    assert [d.job for d in wait.depends_on] == ["up"] and wait.timing.cron == "30 * * * *"
    assert await patched(handle)  # the run took the new path, recorded for replay


async def test_a_signal_from_a_settled_upstream_releases_the_wait_at_once(workflow_env):
    waiting = answer("waiting", "waiting for up 2026-11-30 02:00 UTC, 1 of 2 done")
    upstream = UpstreamStandIns(checks=[waiting, answer("ready")])
    shown = []

    async def settle(handle):
        async def details():
            metadata = await handle.query("__temporal_workflow_metadata")
            assert "1 of 2 done" in metadata.current_details
            shown.append(metadata.current_details)

        await assert_eventually(details, timeout=20)
        await handle.signal(UPSTREAM_SETTLED_SIGNAL)

    stand_ins, _, result = await run(workflow_env, upstream, dependent(), then=settle)
    assert result.outcome == "completed" and stand_ins.names().count(WORK) == 1
    assert upstream.names().count("check_upstream") == 2
    assert upstream.names().count("await_upstream") >= 1  # polled meanwhile, holding no slot
    assert shown[0].startswith("**stand-in-job**")  # under the run's headline


async def test_the_poll_releases_the_wait_without_any_signal(workflow_env):
    upstream = UpstreamStandIns(checks=[answer("waiting", "waiting")], poll=answer("ready"))
    stand_ins, _, result = await run(workflow_env, upstream, dependent())
    assert result.outcome == "completed" and stand_ins.names().count(WORK) == 1
    assert upstream.names() == ["check_upstream", "await_upstream"]


async def test_at_the_deadline_the_policy_decides_skip_without_work(workflow_env):
    reason = "upstream up: 1 of 2 slot(s) not completed within 1s"
    upstream = UpstreamStandIns(
        checks=[answer("waiting", "waiting"), answer("skip", reason=reason)]
    )
    run_input = dependent(within=timedelta(seconds=1), on_failure="skip")
    stand_ins, _, result = await run(workflow_env, upstream, run_input)
    assert (result.outcome, result.reason) == ("skipped", reason)
    assert WORK not in stand_ins.names()
    assert upstream.names().count("check_upstream") == 2  # the second at the deadline's timer


async def test_a_failed_upstream_under_skip_skips_at_once(workflow_env):
    upstream = UpstreamStandIns(checks=[answer("skip", reason="upstream up: 1 slot(s) failed")])
    stand_ins, _, result = await run(workflow_env, upstream, dependent(on_failure="skip"))
    assert (result.outcome, result.reason) == ("skipped", "upstream up: 1 slot(s) failed")
    assert WORK not in stand_ins.names() and upstream.names() == ["check_upstream"]


async def test_run_anyway_does_the_work(workflow_env):
    upstream = UpstreamStandIns(checks=[answer("waiting"), answer("run", reason="run anyway")])

    async def settle(handle):
        await handle.signal(UPSTREAM_SETTLED_SIGNAL)

    stand_ins, _, result = await run(workflow_env, upstream, dependent(on_failure="run"), settle)
    assert result.outcome == "completed" and stand_ins.names().count(WORK) == 1


async def test_cancelling_a_waiting_run_records_its_slot_and_ends_it_cancelled(workflow_env):
    upstream = UpstreamStandIns(checks=[answer("waiting", "waiting")])

    async def cancel(handle):
        await handle.cancel()

    with pytest.raises(WorkflowFailureError) as failed:
        await run(workflow_env, upstream, dependent(), then=cancel)
    assert isinstance(failed.value.cause, CancelledError)
    (cancelled,) = [arg for name, arg in upstream.calls if name == "cancel_wait"]
    assert cancelled.execution_id == 1 and "backfill" in cancelled.reason


async def test_a_job_without_dependencies_never_checks_nor_patches(workflow_env):
    upstream = UpstreamStandIns(checks=[answer("ready")])
    _, handle, result = await run(workflow_env, upstream, job())
    assert result.outcome == "completed" and upstream.calls == []
    assert not await patched(handle)
