"""`Idempotency-Key` on a create: the same key again (from the same API key) answers with
the schedule the first request made, whatever happened to the schedule since; the same
key with another body is refused (422), as the IETF draft
(draft-ietf-httpapi-idempotency-key-header) asks."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable

from psycopg import AsyncConnection

from api.keys import Caller
from api.problems import Problem
from core.sql import queries
from schedules import tenants
from schedules.catalog.problems import short
from schedules.tenants import Outcome, Schedule
from schedules.tenants.store import transaction

Q = queries("api.sql", "idempotency")
MAX_KEY = 255


async def once(
    conn: AsyncConnection,
    caller: Caller,
    idempotency_key: str | None,
    raw_body: bytes,
    create: Callable[[], Awaitable[Outcome]],
) -> tuple[Schedule, bool]:
    """`create()`, or, for a key seen before, the schedule it made (changed False)."""
    if idempotency_key is None:
        outcome = await create()
        return outcome.schedule, outcome.changed
    if not 1 <= len(idempotency_key) <= MAX_KEY:
        raise Problem(
            422, f"Idempotency-Key: must be 1 to {MAX_KEY} characters, got {short(idempotency_key)}"
        )
    params = {
        "key_id": caller.key_id,
        "idempotency_key": idempotency_key,
        "request_sha256": hashlib.sha256(raw_body).digest(),
    }
    async with transaction(conn) as tx:
        seen = await (await tx.execute(Q["find"], params)).fetchone()
        if seen is None:
            outcome = await create()  # a savepoint in this transaction
            await tx.execute(Q["remember"], params | {"schedule_id": outcome.schedule.id})
            return outcome.schedule, outcome.changed
    if bytes(seen["request_sha256"]) != params["request_sha256"]:
        raise Problem(
            422,
            f"Idempotency-Key: {short(idempotency_key)} was sent before with another body; "
            "use a new key for a new request",
        )
    return await tenants.get(conn, seen["schedule_id"], tenant=caller.tenant), False
