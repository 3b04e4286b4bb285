"""How the audit prints: one line per finding (JSON Lines with --json), then a summary."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from schedules.audit.checks import Finding
from schedules.audit.oracle import zone


def utc(instant: datetime | None) -> str | None:
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if instant else None


def local(instant: datetime | None, timezone: str | None) -> str | None:
    if instant is None or timezone is None:
        return None
    return instant.astimezone(zone(timezone)).strftime("%Y-%m-%d %H:%M:%S %Z")


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return utc(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def finding_json(finding: Finding, timezone: str | None) -> dict[str, Any]:
    return {
        "kind": finding.kind,
        "job": finding.job,
        "slot": {
            "utc": utc(finding.slot),
            "local": local(finding.slot, timezone),
            "timezone": timezone,
        },
        "detail": finding.detail,
        "witnesses": {k: _plain(v) for k, v in finding.witnesses.items()},
    }


def finding_line(finding: Finding, timezone: str | None) -> str:
    slot = f"{utc(finding.slot)} ({local(finding.slot, timezone)})" if finding.slot else "-"
    witnesses = " ".join(
        f"{k}={','.join(map(str, _plain(v))) if isinstance(v, list) else _plain(v)}"
        for k, v in finding.witnesses.items()
        if v is not None
    )
    return f"{finding.kind:<15} {finding.job or '-'}  {slot}  {finding.detail}  [{witnesses}]"


def summary(findings: list[Finding], facts: dict[str, Any]) -> dict[str, Any]:
    return {
        "summary": {
            "findings": len(findings),
            "by_kind": dict(sorted(Counter(f.kind for f in findings).items())),
            **facts,
        }
    }


def summary_line(findings: list[Finding], facts: dict[str, Any]) -> str:
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(Counter(f.kind for f in findings).items()))
    notes = "; ".join(f"{job}: {note}" for job, note in facts.get("notes", {}).items())
    return (
        f"audit: {len(findings)} finding(s){f' ({kinds})' if kinds else ''}; "
        f"{facts['jobs']} job(s), {facts['fire_times']} fire time(s) due, "
        f"{facts['rows']} row(s) read, {facts['runs']} run(s) listed; "
        f"slots {facts['from']} to {facts['to']}, settle {facts['settle']}"
        + (f"; {notes}" if notes else "")
    )


def render(findings: list[Finding], facts: dict[str, Any], zones: dict, as_json: bool) -> str:
    if as_json:
        lines = [json.dumps(finding_json(f, zones.get(f.job))) for f in findings]
        return "\n".join([*lines, json.dumps(summary(findings, facts))])
    return "\n".join(
        [*(finding_line(f, zones.get(f.job)) for f in findings), summary_line(findings, facts)]
    )
