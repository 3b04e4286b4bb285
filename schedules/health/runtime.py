"""`check` of runtime schedules (issue 21): missed and failing ones, by kind.

Thousands of schedules belong to customers: the check reports them by kind, with a few
schedule ids as examples, never one line (or one metric label) per tenant.

- *missed*: active schedules whose next slot has been due longer than `DISPATCH_LAG` (the
  dispatcher of their shard is down or behind), and starts decided that long ago and not
  made;
- *failing*: schedules whose newest slot in the lookback failed;
- *slow*: slots still running longer than their kind's allowance (`RuntimeKind.allowance`)
  after they were due: a lost worker's work not handed on, a hung one;
- *tenant_deferred*: a tenant held at its limit (issue 40), one line per tenant (only
  limited tenants are held: a few), with the limit and the oldest wait; its deferred
  schedules are not *missed*;
- *auto_paused*: schedules paused after K consecutive failed slots
  (`pause_after_failures`), with the newest one's note; catalog jobs' too (their pause
  recorded in `schedule_pauses`), one line per job.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import NamedTuple

import psycopg
from psycopg.rows import dict_row

from core.sql import queries
from schedules.tenants.kinds import DEFAULT_ALLOWANCE, runtime_kinds

_Q = queries("schedules.sql", "check_runtime")
DISPATCH_LAG = timedelta(minutes=5)


MISSED, FAILING = "missed_runs", "last_run_failed"  # `check.Kind` values
OVERDUE, SLOW = "dependency_overdue", "slow_run"
DEFERRED, AUTO_PAUSED = "tenant_deferred", "auto_paused"
Alert = tuple[str, str, str]  # (kind of alert, "runtime:<job kind>", message)


class RuntimeAlert(NamedTuple):
    """An alert with the ids of the runtime schedules its message names as examples (the
    dashboard's health page links each to its page)."""

    kind: str
    subject: str  # "runtime:<job kind>", "tenant:<tenant>" or a catalog job's id
    message: str
    examples: tuple[int, ...] = ()


async def runtime_alerts(
    conninfo: str, now: datetime, lookback: timedelta, timeout: float
) -> list[Alert]:
    """The runtime schedules' alerts at `now` (kind, subject, message), read in one
    read-only session."""
    found = await runtime_alerts_with_examples(conninfo, now, lookback, timeout)
    return [(a.kind, a.subject, a.message) for a in found]


async def runtime_alerts_with_examples(
    conninfo: str, now: datetime, lookback: timedelta, timeout: float
) -> list[RuntimeAlert]:
    """`runtime_alerts`, each with the schedule ids its message gives as examples."""
    kinds = runtime_kinds()
    params = {
        "due_before": now - DISPATCH_LAG,
        "since": now - lookback,
        "now": now,
        "kinds": list(kinds),
        "seconds": [k.allowance.total_seconds() for k in kinds.values()],
        "default_seconds": DEFAULT_ALLOWANCE.total_seconds(),
    }
    async with await psycopg.AsyncConnection.connect(
        conninfo, connect_timeout=max(2, int(timeout)), row_factory=dict_row
    ) as conn:
        await conn.set_read_only(True)
        behind = await (await conn.execute(_Q["behind"], params)).fetchall()
        unstarted = await (await conn.execute(_Q["unstarted"], params)).fetchall()
        failing = await (await conn.execute(_Q["failing"], params)).fetchall()
        overdue = await (await conn.execute(_Q["overdue"], params)).fetchall()
        slow = await (await conn.execute(_Q["slow"], params)).fetchall()
        deferred = await (await conn.execute(_Q["deferred"], params)).fetchall()
        auto_paused = await (await conn.execute(_Q["auto_paused"], params)).fetchall()
        catalog_paused = await (await conn.execute(_Q["catalog_auto_paused"])).fetchall()
    alerts = [
        RuntimeAlert(
            MISSED,
            f"runtime:{r['kind']}",
            f"{r['schedules']} runtime schedule(s) not dispatched: next slot due since "
            f"{r['oldest']:%Y-%m-%d %H:%M}Z (is the dispatcher of their shard running?), "
            f"e.g. {_ids(r['examples'])}",
            tuple(r["examples"]),
        )
        for r in behind
    ]
    alerts += [
        RuntimeAlert(
            MISSED,
            f"runtime:{r['kind']}",
            f"{r['intents']} start(s) decided and not made, oldest slot "
            f"{r['oldest']:%Y-%m-%d %H:%M}Z",
            (),
        )
        for r in unstarted
    ]
    alerts += [
        RuntimeAlert(
            FAILING,
            f"runtime:{r['kind']}",
            f"{r['schedules']} runtime schedule(s) whose last run failed, e.g. "
            f"{_ids(r['examples'])} (python -m schedules tenants runs ID)",
            tuple(r["examples"]),
        )
        for r in failing
    ]
    alerts += [
        RuntimeAlert(
            OVERDUE,
            f"runtime:{r['kind']}",
            f"{r['runs']} run(s) still waiting for their upstream slots past their deadline "
            f"(oldest {r['oldest']:%Y-%m-%d %H:%M}Z), e.g. schedules {_ids(r['examples'])} "
            "(python -m schedules tenants explain ID SLOT)",
            tuple(r["examples"]),
        )
        for r in overdue
    ]
    alerts += [
        RuntimeAlert(
            SLOW,
            f"runtime:{r['kind']}",
            f"{r['runs']} run(s) still running past their kind's allowance (oldest slot "
            f"{r['oldest']:%Y-%m-%d %H:%M}Z), e.g. schedules {_ids(r['examples'])} (is a "
            "worker lost or stuck? python -m schedules tenants explain ID SLOT)",
            tuple(r["examples"]),
        )
        for r in slow
    ]
    alerts += [
        RuntimeAlert(
            DEFERRED,
            f"tenant:{r['tenant']}",
            f"tenant {r['tenant']} held at its limit: {r['schedules']} schedule(s) deferred "
            f"by the tenant's limit ({r['reason']}), waiting since "
            f"{r['oldest']:%Y-%m-%d %H:%M}Z, e.g. {_ids(r['examples'])} "
            "(python -m schedules tenants limits show TENANT)",
            tuple(r["examples"]),
        )
        for r in deferred
    ]
    alerts += [
        RuntimeAlert(
            AUTO_PAUSED,
            f"runtime:{r['kind']}",
            f"{r['schedules']} runtime schedule(s) auto-paused after repeated failures, e.g. "
            f"rt-{r['examples'][0]}: {r['note']} (python -m schedules tenants resume ID "
            "once fixed)",
            tuple(r["examples"]),
        )
        for r in auto_paused
    ]
    alerts += [
        RuntimeAlert(
            AUTO_PAUSED,
            r["job_name"],
            f"schedule paused at {r['paused_at']:%Y-%m-%d %H:%M}Z: {r['note']} "
            f"(python -m schedules resume {r['job_name']} once fixed)",
            (),
        )
        for r in catalog_paused
    ]
    return alerts


def _ids(ids: list[int]) -> str:
    return ", ".join(str(i) for i in ids)
