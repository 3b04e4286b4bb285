"""The dashboard's own reads (`pages.sql`), each in one short transaction of the request's
pooled connection. Every write goes through `schedules` and `schedules.tenants`."""

from __future__ import annotations

from typing import Any

from core.sql import queries
from schedules.tenants import store

Q = queries("api.pages", "pages")


async def rows(conn: Any, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of the named query of `pages.sql`, as dicts."""
    async with store.transaction(conn) as tx:
        cur = await tx.execute(Q[name], params)
        return await cur.fetchall()


async def last_runs(conn: Any, job_names: list[str]) -> dict[str, dict[str, Any]]:
    """The newest ledger row of each of these jobs (`rt-<id>` for a runtime schedule, the
    job id for a catalog job), by job name; none for a job that never ran."""
    if not job_names:
        return {}
    return {row["job_name"]: row for row in await rows(conn, "last_runs", {"jobs": job_names})}
