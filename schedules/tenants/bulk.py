"""Import and export of runtime schedules as JSON Lines, one schedule an object a line.

Import validates every line first (each problem named by its line number) and writes
nothing unless all are good; then, in one transaction, it copies the lines into a temporary
table (`COPY`) and inserts the new schedules and their change-log rows in two set-based
statements. Idempotent: a line naming a live schedule with the same definition is left
alone; one with another definition is a conflict, and nothing is written.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb
from pydantic import ValidationError

import schedules.tenants.dependencies as dependencies
import schedules.tenants.ownership as ownership
import schedules.tenants.store as store
from activities.claim.executions import Clock, utcnow
from core.errors import ConflictError, InvalidScheduleError, QuotaError
from schedules.catalog.problems import short
from schedules.progress import QUIET, Progress
from schedules.tenants.api import searched
from schedules.tenants.model import (
    BUCKETS,
    Definition,
    Schedule,
    checked_by,
    stored_dependencies,
    validation_line,
)
from schedules.tenants.quota import Quotas
from schedules.tenants.store import Database
from schedules.tenants.values import (
    MAX_DEPTH,
    JsonTextError,
    json_problem,
    problem_text,
    read_json,
)

# The keys a line may hold; `export` writes no others.
LINE_KEYS = frozenset(Definition.model_fields)
_SHOWN = 20  # problems listed in one refusal


@dataclass(frozen=True)
class ImportReport:
    lines: int
    created: int
    unchanged: int


def _refusal(problems: list[str], total: int) -> str:
    shown = problems[:_SHOWN]
    more = f"\n  ... and {len(problems) - _SHOWN} more" if len(problems) > _SHOWN else ""
    if len(problems) == 1:
        return f"{problems[0]}; nothing was written"
    return (
        f"{len(problems)} of {total} line(s) refused; nothing was written:\n  "
        + "\n  ".join(shown)
        + more
    )


def _parse_line(number: int, line: str | bytes) -> Definition | str:
    """One line (text, or bytes read as UTF-8) as a `Definition`, or its problem (`line N:
    ...`, naming the field where the line is an object)."""
    try:
        text = line.decode() if isinstance(line, bytes) else line
        data = read_json(text)
    except UnicodeDecodeError as exc:
        byte = exc.object[exc.start]
        return f"line {number}: not UTF-8 text: byte {byte:#04x} at column {exc.start + 1}"
    except JsonTextError as exc:
        return f"line {number}: {exc}"
    if not isinstance(data, dict):
        return f"line {number}: must be a JSON object, got {short(text.strip())}"
    who = f"schedule {short(data.get('tenant'))}/{short(data.get('name'))}"
    if (problem := json_problem(data, depth=MAX_DEPTH + 1)) is not None:
        return f"line {number}: {who}: {problem_text(*problem)}"
    if "calendar_definition" in data:
        return f"line {number}: calendar_definition: is not a field; name a calendar (`calendar`)"
    try:
        return Definition.model_validate(data)
    except ValidationError as exc:
        return f"line {number}: {validation_line(data, exc)}"


def parse_lines(
    lines: Iterable[str | bytes], quotas: Quotas, progress: Progress = QUIET
) -> list[tuple[int, Definition]]:
    """Every non-blank line as a validated `Definition` with its line number, or one
    `InvalidScheduleError` (`QuotaError` when only quotas refuse) listing the problems.
    `progress` is told of each line checked."""
    parsed: list[tuple[int, Definition]] = []
    problems: list[str] = []
    quota_problems = 0
    seen: dict[tuple[str, str], int] = {}
    total = 0
    for number, text in enumerate(lines, start=1):
        progress.advance()
        if not text.strip():  # bytes or text: blank either way
            continue
        total += 1
        new = _parse_line(number, text)
        if isinstance(new, str):
            problems.append(new)
            continue
        key = (new.tenant, new.name)
        if key in seen:
            problems.append(
                f"line {number}: schedule {new.tenant!r}/{new.name!r}: name: already on "
                f"line {seen[key]}"
            )
            continue
        seen[key] = number
        try:
            quotas.check_period(new)
        except QuotaError as exc:
            problems.append(f"line {number}: {str(exc).removesuffix('; nothing was written')}")
            quota_problems += 1
            continue
        parsed.append((number, new))
    if problems:
        error = QuotaError if quota_problems == len(problems) else InvalidScheduleError
        raise error(_refusal(problems, total))
    return parsed


async def import_lines(
    db: Database,
    lines: Iterable[str | bytes],
    *,
    by: str = "",
    quotas: Quotas | None = None,
    clock: Clock = utcnow,
    progress: Progress = QUIET,
) -> ImportReport:
    """Create the schedules of `lines` (JSON Lines: text, or bytes read as UTF-8 line by
    line, so a line that is not names its number) that do not exist yet; see the module.
    `progress` is told of each line checked, then of each one copied (`schedules.progress`)."""
    checked_by(by)
    quotas = quotas or Quotas.from_environment()
    lines = list(lines)
    try:
        progress.phase("check", len(lines), unit="line")
        parsed = parse_lines(lines, quotas, progress)
        progress.phase("copy", len(parsed), unit="line")
        created = await _copy_in(db, parsed, by, quotas, clock(), progress)
    finally:
        progress.close()  # a refusal's lines print below no bar
    return ImportReport(len(parsed), created, len(parsed) - created)


async def _copy_in(
    db: Database,
    parsed: list[tuple[int, Definition]],
    by: str,
    quotas: Quotas,
    now: datetime,
    progress: Progress,
) -> int:
    """Copy the lines in and create the new schedules, in one transaction; how many."""
    nexts: dict[tuple[Any, ...], datetime | None] = {}

    def next_of(new: Definition) -> datetime | None:
        key = (new.cron, new.timezone, new.start_at, new.end_at)
        if key not in nexts:
            nexts[key] = new.timing.next_after(now)
        return nexts[key]

    async with store.transaction(db, pipeline=False) as conn:
        await store.lock_tenants(conn, sorted({new.tenant for _, new in parsed}))
        foreign = await ownership.problems(conn, [(f"line {n}", new) for n, new in parsed])
        if foreign:
            raise InvalidScheduleError(_refusal(foreign, len(parsed)))
        await conn.execute(store.Q["import_table"])
        cur = conn.cursor()
        async with cur.copy(store.Q["import_copy"]) as copy:
            for number, new in parsed:
                await copy.write_row(_copy_row(number, new, next_of(new)))
                progress.advance()
        await _refuse_conflicts(conn)
        await _check_counts(conn, quotas)
        await _check_dependencies(conn, parsed, now)
        cur = await conn.execute(
            store.Q["import_insert"], {"by": by, "now": now, "shards": BUCKETS}
        )
        return cur.rowcount


def _copy_row(number: int, new: Definition, next_fire_at: datetime | None) -> tuple:
    return (
        number,
        new.tenant,
        new.name,
        new.kind,
        new.cron,
        new.timezone,
        Jsonb(new.params),
        new.catchup,
        new.max_missed,
        new.start_at,
        new.end_at,
        new.paused,
        new.note or None,
        next_fire_at,
        new.calendar,
        store.columns(new)["calendar_definition"],
        new.on_holiday if new.calendar else None,
        Jsonb(stored_dependencies(new)),
    )


async def _refuse_conflicts(conn: Any) -> None:
    rows = await store.all_rows(conn, "import_conflicts", {})
    if rows:
        problems = [
            f"line {r['line']}: schedule {r['tenant']!r}/{r['name']!r} exists (id {r['id']}) "
            "with another definition; update it, or delete it first"
            for r in rows
        ]
        raise ConflictError(_refusal(problems, len(problems)))


async def _check_dependencies(
    conn: Any, parsed: list[tuple[int, Definition]], now: datetime
) -> None:
    """Each tenant's set after the import, checked for the lines that depend on others
    (`schedules.tenants.dependencies`); lines already stored are left as they are."""
    by_tenant: dict[str, dict[str, Definition]] = {}
    numbers: dict[str, dict[str, int]] = {}
    for number, new in parsed:
        by_tenant.setdefault(new.tenant, {})[new.name] = new
        numbers.setdefault(new.tenant, {})[new.name] = number
    for tenant, lines in sorted(by_tenant.items()):
        if not any(new.depends_on for new in lines.values()):
            continue
        stored = await dependencies.tenant_set(conn, tenant, lines.values())
        judged = set(lines) - set(stored)
        dependencies.check(tenant, lines | stored, judged, now, numbers[tenant])


async def _check_counts(conn: Any, quotas: Quotas) -> None:
    for row in await store.all_rows(conn, "import_counts", {}):
        quotas.check_count(row["tenant"], row["stored"], row["adding"])


async def export(
    db: Database, *, tenant: str | None = None, page: int = 1000
) -> AsyncIterator[dict]:
    """Every live schedule (of `tenant`, if given) as the object `import` reads, by id."""
    searched("tenant", tenant)
    after = 0
    async with store.transaction(db) as conn:
        while True:
            rows = await store.all_rows(
                conn, "export", {"after": after, "tenant": tenant, "limit": page}
            )
            for row in rows:
                yield Schedule.of_row(row).definition()
            if len(rows) < page:
                return
            after = rows[-1]["id"]
