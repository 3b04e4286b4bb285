"""Which of a runtime kind's params name a tenant's resources, and the check that they do.

A runtime schedule belongs to a tenant, and so must what its params name: a
`weekly-report` schedule of tenant A whose `customer_id` is B's customer would report B's
week to A and mail B. A runtime kind declares its params that name a tenant's resources
(`RuntimeKind.owns`, `activities.run.kinds`): each an `OwnershipCheck`, a callable that takes a
connection, the schedules' tenants and their params, and answers which of them name
something their tenant does not own, each with its one line. `TenantRow` is the common
one: a param names a row of a table whose tenant column is the schedule's tenant; a kind
may supply its own (any callable of that shape), e.g. for a resource kept elsewhere.

The engine asks the checks when params are written (create, import, update, apply: one
statement per check for all the schedules of the write, `schedules.tenants.ownership`),
when a slot is asked for (trigger, backfill), and again in the transaction that works a
slot, with `lock`: the rows named stay the tenant's until the work commits. A resource
that is another tenant's and one that does not exist are answered alike, so a refusal
tells a tenant nothing about others.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import psycopg
from psycopg import AsyncConnection, sql
from psycopg.rows import tuple_row
from psycopg.types.json import Jsonb
from temporalio.exceptions import ApplicationError

from activities.common.models import ExecutionRef
from activities.runtime.models import schedule_id_of
from core.sql import queries

_Q = queries("activities.runtime", "ownership")


class OwnershipCheck(Protocol):
    """A kind's check of the resources its params name (see the module)."""

    def __call__(
        self,
        conn: AsyncConnection,
        tenants: Sequence[str],
        params: Sequence[Mapping[str, Any]],
        *,
        lock: bool = False,
    ) -> Awaitable[Mapping[int, str]]:
        """For the i-th schedule (tenant `tenants[i]`, params `params[i]`, JSON as
        stored), whether its params name a resource its tenant does not own: {i: the
        problem, `params.customer_id: names no customer of tenant 'acme' (got 7)`} for
        each that does. `lock`: keep the resources named as they are until the
        transaction ends (the slot's work runs next). One statement for all of them."""
        ...


@dataclass(frozen=True)
class TenantRow:
    """`params[param]` (a value, or a list of values; absent or null names nothing) is a
    key of `table` (`column`, its own type) whose `tenant_column` is the schedule's tenant.
    `what` names the row in refusals (default: "row of <table>")."""

    param: str
    table: str
    column: str = "id"
    tenant_column: str = "tenant"
    what: str = ""

    async def __call__(
        self,
        conn: AsyncConnection,
        tenants: Sequence[str],
        params: Sequence[Mapping[str, Any]],
        *,
        lock: bool = False,
    ) -> dict[int, str]:
        refs = [
            (i, value) for i, one in enumerate(params) for value in _values(one.get(self.param))
        ]
        if not refs:
            return {}
        owned = await self._owned(conn, [tenants[i] for i, _ in refs], [v for _, v in refs], lock)
        found: dict[int, str] = {}
        for n, (i, value) in enumerate(refs):
            if n not in owned and i not in found:
                found[i] = (
                    f"params.{self.param}: names no {self.what or f'row of {self.table}'} "
                    f"of tenant {tenants[i]!r} (got {value!r})"
                )
        return found

    async def _owned(
        self, conn: AsyncConnection, tenants: list[str], values: list[Any], lock: bool
    ) -> set[int]:
        """The positions (from 0) of the (tenant, value) pairs naming a row the tenant
        owns, in one statement; a value the column cannot hold names none."""
        query = sql.SQL(_Q["owned_rows"]).format(
            table=sql.Identifier(*self.table.split(".")),
            column=sql.Identifier(self.column),
            tenant=sql.Identifier(self.tenant_column),
            lock=sql.SQL("FOR SHARE OF r" if lock else ""),
        )
        args = {"column": self.column, "tenants": tenants, "values": [Jsonb(v) for v in values]}
        cur = conn.cursor(row_factory=tuple_row)
        try:
            await cur.execute(query, args)
            rows = await cur.fetchall()
        except psycopg.errors.DataError as exc:  # a value the column cannot hold
            raise UnownableValueError(
                f"params.{self.param}: is not a {self.table}.{self.column} value "
                f"({str(exc).strip().splitlines()[0]})"
            ) from None
        return {n - 1 for (n,) in rows}


class UnownableValueError(ValueError):
    """A param's value cannot be a key of the resource's table at all (the transaction
    that asked is aborted: the write or the slot's work fails with it)."""


def _values(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, list):
        return [v for v in value if v is not None]
    return [value]


async def foreign(
    conn: AsyncConnection,
    checks: Sequence[OwnershipCheck],
    tenants: Sequence[str],
    params: Sequence[Mapping[str, Any]],
    *,
    lock: bool = False,
) -> dict[int, str]:
    """The first problem each check finds for each schedule, by its position."""
    found: dict[int, str] = {}
    for check in checks:
        for i, problem in (await check(conn, tenants, params, lock=lock)).items():
            found.setdefault(i, problem)
    return found


async def refuse_foreign_slot(
    conn: AsyncConnection,
    execution: ExecutionRef,
    params: Mapping[str, Any],
    checks: Sequence[OwnershipCheck],
) -> None:
    """In the transaction of a runtime slot's work, before it: a permanent failure
    (`ForeignResource`, nothing done, the run records it failed) if the slot's `params`
    name a resource its schedule's tenant does not own (any more); else the resources
    named are locked to the end of the transaction. A catalog job's slot is not checked."""
    schedule_id = schedule_id_of(execution.job_name)
    if schedule_id is None or not checks:
        return
    tenant = await schedule_tenant(conn, schedule_id) or ""
    try:
        found = await foreign(conn, checks, [tenant], [params], lock=True)
    except UnownableValueError as exc:
        found = {0: str(exc)}
    if found:
        raise ApplicationError(
            f"{execution.job_name}: {found[0]}; the slot did nothing",
            type="ForeignResource",
            non_retryable=True,
        )


async def schedule_tenant(conn: AsyncConnection, schedule_id: int) -> str | None:
    """The tenant of runtime schedule `schedule_id` (a schedule's tenant never changes)."""
    cur = conn.cursor(row_factory=tuple_row)
    await cur.execute(_Q["schedule_tenant"], {"id": schedule_id})
    row = await cur.fetchone()
    return None if row is None else row[0]
