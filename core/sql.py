"""The one SQL loader: named queries kept in `.sql` files next to the code that runs them.

A file holds several queries, each introduced by a `-- name: query_name` line. Engine
queries live beside the part of the engine that runs them (`activities/<part>/*.sql`),
each job's in `jobs/<family>/queries.sql`, the process's in `worker/sql/`, the CLI's in
`schedules/sql/`; tables come from `worker/migrations/`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

import psycopg

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

_HEADER = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


@cache
def queries(package: str, name: str) -> dict[str, str]:
    """The queries of `<package>/<name>.sql` by name (e.g. `queries("activities.claim",
    "executions")`, or `queries(__package__, "queries")` in a job's package)."""
    text = resources.files(package).joinpath(f"{name}.sql").read_text()
    parts = _HEADER.split(text)
    if parts[0].strip() and not all(
        line.startswith("--") for line in parts[0].strip().splitlines()
    ):
        raise ValueError(f"{package}/{name}.sql has SQL before its first '-- name:' line")
    named = {}
    for query, body in zip(parts[1::2], parts[2::2], strict=True):
        if query in named:
            raise ValueError(f"query {query!r} is defined twice in {package}/{name}.sql")
        named[query] = body.strip()
    return named


async def first_row(pool: AsyncConnectionPool, query: str, params: Mapping[str, Any]) -> Any:
    """Run one statement on a connection of `pool`, in a transaction of its own (committed
    as the connection goes back), and return its first row (None if it has none)."""
    async with pool.connection() as conn:
        cur = await conn.execute(query, params)
        return await cur.fetchone()


async def execute_once(
    conninfo: str, query: str, params: Mapping[str, Any], connect_timeout: int = 5
) -> None:
    """Run one statement on a short connection of its own, autocommit: a command's record
    of what it did (a pause, a backfill request), written outside any transaction."""
    async with await psycopg.AsyncConnection.connect(
        conninfo, connect_timeout=connect_timeout, autocommit=True
    ) as conn:
        await conn.execute(query, params)
