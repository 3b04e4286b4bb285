-- The audit's reports, kept (schedules/audit/reports.py; worker/migrations/0034).

-- name: record_report
INSERT INTO audit_reports (audited_at, window_start, window_end, verdict, findings_total,
                           summary, findings, recorded_by)
VALUES (%(audited_at)s, %(window_start)s, %(window_end)s, %(verdict)s, %(findings_total)s,
        %(summary)s, %(findings)s, %(by)s)
RETURNING id

-- name: prune_reports
-- Keep the newest `keep` reports.
DELETE FROM audit_reports
WHERE id NOT IN (SELECT id FROM audit_reports ORDER BY audited_at DESC, id DESC
                 LIMIT %(keep)s)

-- name: latest_report
SELECT id, audited_at, window_start, window_end, verdict, findings_total, summary, findings,
       recorded_by
FROM audit_reports ORDER BY audited_at DESC, id DESC LIMIT 1
