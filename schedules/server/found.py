"""Reads of the Temporal server that answer None for what does not exist."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

from temporalio.client import Client, ScheduleDescription, WorkflowExecutionDescription
from temporalio.service import RPCError, RPCStatusCode

from schedules.catalog.compile import CATALOG_MEMO_KEY

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


async def catalog_entry(client: Client, description: ScheduleDescription) -> dict[str, Any] | None:
    """The catalog entry the schedule was built from (`CATALOG_MEMO_KEY` of its action's
    memo), or None when it cannot be told (a schedule this project did not write, or one
    last written by a sync before v5, whose run input held it: it differs, and the next
    sync rewrites it)."""
    memo = getattr(description.schedule.action, "memo", None) or {}
    if CATALOG_MEMO_KEY not in memo:
        return None
    entry = memo[CATALOG_MEMO_KEY]
    if isinstance(entry, dict):
        return entry
    try:
        return client.data_converter.payload_converter.from_payload(entry, dict)
    except Exception:  # a foreign payload: "everything differs"
        return None
    return None
