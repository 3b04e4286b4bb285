"""Reads of the Temporal server that answer None for what does not exist."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

from temporalio.client import Client, ScheduleDescription, WorkflowExecutionDescription
from temporalio.service import RPCError, RPCStatusCode

T = TypeVar("T")


async def _none_if_not_found(read: Awaitable[T]) -> T | None:
    try:
        return await read
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise


async def schedule_or_none(client: Client, schedule_id: str) -> ScheduleDescription | None:
    """The schedule's description, or None if the server has no such schedule."""
    return await _none_if_not_found(client.get_schedule_handle(schedule_id).describe())


async def workflow_or_none(client: Client, workflow_id: str) -> WorkflowExecutionDescription | None:
    """The description of the newest run with this workflow id, or None if there is none."""
    return await _none_if_not_found(client.get_workflow_handle(workflow_id).describe())
