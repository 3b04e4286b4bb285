"""Workflow code changes must replay against recorded histories (temporalio Replayer).

The histories under `histories/` were recorded from real runs before the change they guard:
`scheduled_job_triggered.json` a schedule-started (triggered) run that plans, claims and does
its work; `scheduled_job_direct.json` a run started without a schedule. Record a new one
(`(await handle.fetch_history()).to_json()`) when the workflow gains a path they miss.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from worker.run import workflow_runner
from workflows import ScheduledJobWorkflow

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_recorded_history_replays(path: Path):
    history = WorkflowHistory.from_json(path.stem, path.read_text())
    replayer = Replayer(
        workflows=[ScheduledJobWorkflow],
        data_converter=pydantic_data_converter,
        workflow_runner=workflow_runner(),  # the workers' sandbox, as in production
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=True)
    assert result.replay_failure is None
