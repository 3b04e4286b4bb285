"""Workflow code replays every recorded history: a change that would break running workflows
at deploy time fails here, not in production.

Histories are recorded by `tests/replay/record_histories.py` (one folder per label, one
label per release: docs/architecture.md, Compatibility shims and patches); a history
recorded with older code must still replay with the current one, as long as the code
still runs that release's runs: the histories of `v1` and `v2` went with the branch that ran
them (patch `begin-run-local`, removed in v7). This is the one replay suite.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from core.payloads import data_converter
from worker.run import fleet_workflows, workflow_runner
from workflows import ScheduledJobWorkflow

HISTORIES = sorted(
    p
    for p in (Path(__file__).parent / "histories").glob("*/*.json")
    if p.name != "workflow_ids.json"
)


def workflow_id(path: Path) -> str:
    """The recorded workflow's id (a child workflow's id is derived from its parent's)."""
    ids = path.parent / "workflow_ids.json"
    return json.loads(ids.read_text()).get(path.stem, path.stem) if ids.exists() else path.stem


def test_histories_were_recorded():
    labels = {path.parent.name for path in HISTORIES}
    # The oldest release whose runs this code still finishes, and the current one.
    assert {"v3", "v7", "v7-bounded"} <= labels and len(HISTORIES) >= 14
    # The runs of runtime schedules, per slot and in batches (issue 21).
    runtime = {p.stem for p in HISTORIES if p.parent.name == "v6-runtime"}
    assert {"runtime-run-completed", "runtime-run-failed", "runtime-batch"} <= runtime


@pytest.mark.parametrize("path", HISTORIES, ids=[f"{p.parent.name}/{p.stem}" for p in HISTORIES])
@pytest.mark.parametrize("strict", [True, False], ids=["logic-sandboxed", "as-workers-run"])
async def test_history_replays_without_nondeterminism(path: Path, strict: bool):
    history = WorkflowHistory.from_json(workflow_id(path), path.read_text())
    replayer = Replayer(
        workflows=fleet_workflows(),
        workflow_runner=workflow_runner(strict=strict),
        data_converter=data_converter,
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.name}: {result.replay_failure!r}"


async def test_a_run_an_older_worker_started_with_dependencies_replays_without_waiting():
    """A rolling deploy: sync (this release) wrote `depends_on` into the schedule, and a
    worker of the previous release started the run, which ignored it (no wait, no patch
    marker). This release replays that history: `workflow.patched` says no, no wait."""
    path = Path(__file__).parent / "histories" / "v5" / "nightly-reconcile.json"
    recorded = json.loads(path.read_text())
    started = recorded["events"][0]["workflowExecutionStartedEventAttributes"]
    payload = started["input"]["payloads"][0]
    run = json.loads(base64.b64decode(payload["data"]))
    run["depends_on"] = [{"job": "hourly-sync", "slots": "window", "within": "PT2H"}]
    payload["data"] = base64.b64encode(json.dumps(run).encode()).decode()
    history = WorkflowHistory.from_json(workflow_id(path), json.dumps(recorded))
    replayer = Replayer(
        workflows=[ScheduledJobWorkflow],
        workflow_runner=workflow_runner(strict=True),
        data_converter=data_converter,
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, repr(result.replay_failure)
