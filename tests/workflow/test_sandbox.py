"""Where the sandbox checks the workflow code (`worker.run.WORKFLOW_LOGIC`: the workflow
types' modules and their logic): workers take those modules as they are, imported once; the
workflow tier and the replay tests run them sandboxed (`workflow_runner(strict=True)`), so a
call to the clock in them fails the workflow task here, before a release, as Temporal's
sandbox would fail it in a worker."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    import uuid
    from datetime import timedelta

    import pytest
    from temporalio.api.enums.v1 import EventType
    from temporalio.client import WorkflowFailureError
    from temporalio.worker import Worker
    from temporalio.worker.workflow_sandbox._importer import Importer
    from temporalio.worker.workflow_sandbox._restrictions import RestrictionContext

    from tests.helpers import assert_eventually
    from worker.run import fleet_workflows, workflow_runner

from workflows import job_run


@workflow.defn(sandboxed=True)
class ReadsTheClockInTheLogic:
    """Workflow logic that reads the wall clock, as a mistake in `workflows/job_run.py`
    would (its `datetime` is the module's own import)."""

    @workflow.run
    async def run(self) -> str:
        return job_run.datetime.now().isoformat()


async def _start(workflow_env, strict: bool):
    task_queue = f"sandbox-{uuid.uuid4().hex[:12]}"
    worker = Worker(
        workflow_env.client,
        task_queue=task_queue,
        workflows=[ReadsTheClockInTheLogic],
        workflow_runner=workflow_runner(strict=strict),
    )
    handle = await workflow_env.client.start_workflow(
        ReadsTheClockInTheLogic.run,
        id=f"sandbox-{uuid.uuid4().hex[:8]}",
        task_queue=task_queue,
        execution_timeout=timedelta(minutes=2),
    )
    return worker, handle


async def test_strict_the_sandbox_fails_a_clock_call_in_the_workflow_logic(workflow_env):
    worker, handle = await _start(workflow_env, strict=True)
    async with worker:

        async def task_failed_on_the_clock():
            history = await handle.fetch_history()
            failures = [
                e.workflow_task_failed_event_attributes.failure.message
                for e in history.events
                if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
            ]
            assert any("datetime.datetime.now" in message for message in failures), failures

        await assert_eventually(task_failed_on_the_clock, timeout=30)
        await handle.terminate("the sandbox refused it, as it should")
    with pytest.raises(WorkflowFailureError):
        await handle.result()


async def test_in_a_worker_the_logic_runs_as_imported_once(workflow_env):
    worker, handle = await _start(workflow_env, strict=False)
    async with worker:
        assert await handle.result()  # not refused: the check is the strict tier's


def _type_modules() -> set[str]:
    """The modules that declare the fleet's workflow types."""
    return {cls.__module__ for cls in fleet_workflows()}


def _imported_afresh(strict: bool) -> set[str]:
    """The modules of the fleet's workflow types that a sandbox of `workflow_runner(strict)`
    imports afresh for every run (Temporal's default for a workflow's module)."""
    importer = Importer(workflow_runner(strict=strict).restrictions, RestrictionContext())
    return {name for name in _type_modules() if not importer.module_configured_passthrough(name)}


def test_a_worker_imports_every_workflow_types_module_once():
    # A new workflow type of the fleet's own whose module is not in WORKFLOW_LOGIC would have a worker import
    # it, and `workflow.defn` inspect its class, again for every run of it.
    assert _imported_afresh(strict=False) == set()


def test_strict_the_sandbox_imports_every_workflow_types_module_afresh():
    assert _imported_afresh(strict=True) == _type_modules()
