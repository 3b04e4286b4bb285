"""The audit's reports, kept: `record_report` (what `python -m schedules audit` does with
each report it prints, unless `--no-record`) and `latest_report` (what the dashboard's
health page shows). Table `audit_reports`, migration 0034.

A report is stored as the audit prints it with `--json`: each finding's JSON line (at
most `MAX_STORED` of them; `findings_total` counts them all) and the summary. Details are
scrubbed of secrets (`core.redact`) before they are stored; witnesses are ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from core import redact
from core.sql import queries
from schedules.audit.format import finding_json, summary
from schedules.tenants import store

_Q = queries("schedules.sql", "audit_reports")
MAX_STORED = 1000  # findings kept per report
KEEP = 200  # reports kept


@dataclass(frozen=True)
class StoredAudit:
    """One recorded audit: when, over which scheduled times, its verdict and findings."""

    id: int
    audited_at: datetime
    window_start: datetime
    window_end: datetime
    verdict: str  # clean | findings
    findings_total: int
    summary: dict[str, Any] = field(default_factory=dict)
    findings: list[dict[str, Any]] = field(default_factory=list)
    recorded_by: str = ""


async def record_report(
    db: store.Database,
    report: Any,
    facts: dict[str, Any],
    zones: dict[str, str],
    *,
    by: str = "",
) -> int:
    """Store `report` (a `schedules.audit.AuditReport`) with the summary `facts` the CLI
    prints and each job's zone; the newest `KEEP` reports stay. Its id."""
    findings = report.findings
    stored = [finding_json(f, zones.get(f.job or "")) for f in findings[:MAX_STORED]]
    for line in stored:
        line["detail"] = redact.scrub(line["detail"])
    params = {
        "audited_at": report.window.now,
        "window_start": report.window.start,
        "window_end": report.window.end,
        "verdict": "clean" if report.exit_code == 0 else "findings",
        "findings_total": len(findings),
        "summary": Jsonb(summary(findings, facts)["summary"]),
        "findings": Jsonb(stored),
        "by": by,
    }
    async with store.transaction(db) as conn:
        row = await (await conn.execute(_Q["record_report"], params)).fetchone()
        await conn.execute(_Q["prune_reports"], {"keep": KEEP})
    return row["id"]


async def latest_report(db: store.Database) -> StoredAudit | None:
    """The newest recorded audit, or None if none was recorded."""
    async with store.transaction(db) as conn:
        row = await (await conn.execute(_Q["latest_report"])).fetchone()
    return None if row is None else StoredAudit(**row)
