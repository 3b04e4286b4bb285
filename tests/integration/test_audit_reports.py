"""The audit's reports as recorded (schedules/audit/reports.py, migration 0034): the
first `MAX_STORED` findings of a report with the count of all, secrets scrubbed from
their details, the newest `KEEP` reports kept, and `latest_report` the newest."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg

from schedules.audit import AuditReport
from schedules.audit.finding import Finding
from schedules.audit.history import Window
from schedules.audit.reports import KEEP, MAX_STORED, latest_report, record_report

NOW = datetime(2027, 3, 14, 12, 0, tzinfo=UTC)
SLOT = datetime(2027, 3, 14, 7, 0, tzinfo=UTC)


def report(findings: list[Finding], now: datetime = NOW) -> AuditReport:
    window = Window(now - timedelta(days=7), now, now, timedelta(0), timedelta(minutes=5),
                    timedelta(minutes=15))  # fmt: skip
    return AuditReport(findings=findings, scopes=[], window=window, rows=3, runs=2)


FACTS = {"jobs": 1, "fire_times": 2, "rows": 3, "runs": 2, "from": "-", "to": "-",
         "settle": "0s", "notes": {}}  # fmt: skip


async def test_a_report_keeps_its_first_findings_and_no_secret(database_url):
    leaked = "postgresql://app:hunter2-pw@db.internal:5432/app"
    findings = [
        Finding("lost", "rt-7", SLOT + timedelta(minutes=i), f"no row ({leaked})", {"n": i})
        for i in range(MAX_STORED + 1)
    ]
    await record_report(database_url, report(findings), FACTS, {"rt-7": "Europe/Paris"})
    stored = await latest_report(database_url)
    assert stored is not None
    assert (stored.verdict, stored.findings_total, len(stored.findings)) == (
        "findings",
        MAX_STORED + 1,
        MAX_STORED,
    )
    first = stored.findings[0]
    assert first["slot"] == {"utc": "2027-03-14T07:00:00Z", "local": "2027-03-14 08:00:00 CET",
                             "timezone": "Europe/Paris"}  # fmt: skip
    assert "hunter2-pw" not in str(stored.findings) and first["witnesses"] == {"n": 0}
    assert stored.summary["by_kind"] == {"lost": MAX_STORED + 1} and stored.summary["rows"] == 3


async def test_the_newest_reports_are_kept_and_the_latest_is_the_newest(database_url, db):
    assert await latest_report(database_url) is None
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        for n in range(KEEP + 2):
            await record_report(conn, report([], NOW + timedelta(hours=n)), FACTS, {})
    (count,) = db.execute("SELECT count(*) FROM audit_reports").fetchone()
    assert count == KEEP
    newest = await latest_report(database_url)
    assert newest is not None and newest.verdict == "clean"
    assert newest.audited_at == NOW + timedelta(hours=KEEP + 1)
