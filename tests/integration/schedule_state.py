"""The server's schedules, byte for byte: to show that a refused command changed nothing."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode


async def snapshot(client: Client, ids: set[str] | None = None) -> dict[str, bytes]:
    """Every schedule (or those of `ids`) as the server stores it: its spec, action, policy
    and state, memo and search attributes serialised, and its last update time.

    Info that moves by itself (next and recent runs) is left out; the update time is in,
    so even a write of identical content shows.
    """
    if ids is None:
        ids = {entry.id async for entry in await client.list_schedules()}
    found = {}
    for schedule_id in sorted(ids):
        try:
            raw = (await client.get_schedule_handle(schedule_id).describe()).raw_description
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            continue
        found[schedule_id] = b"|".join(
            [
                raw.schedule.SerializeToString(deterministic=True),
                raw.memo.SerializeToString(deterministic=True),
                raw.search_attributes.SerializeToString(deterministic=True),
                raw.info.update_time.SerializeToString(deterministic=True),
            ]
        )
    return found
