-- The audit's reports, kept (issue 39, item 4): `python -m schedules audit` records each
-- report it prints (unless --no-record), and the dashboard's health page shows the newest
-- (docs/dashboard.md). Additive: the previous release reads none of it.
--
-- `findings` holds at most the first 1,000 findings as the audit's JSON Lines print them
-- (kind, job, slot in UTC and local time, detail, witnesses), `findings_total` all of them;
-- `summary` is the audit's summary line as JSON (counts by kind, jobs, fire times due,
-- rows read, runs listed, settle). Witnesses are ids (rows, workflows, runs, outbox
-- messages), and each detail is scrubbed of secrets before it is stored. The newest 200
-- reports are kept; the recording of a report deletes the older ones.
CREATE TABLE audit_reports (
    id              bigserial   PRIMARY KEY,
    audited_at      timestamptz NOT NULL,
    window_start    timestamptz NOT NULL,
    window_end      timestamptz NOT NULL,
    verdict         text        NOT NULL CHECK (verdict IN ('clean', 'findings')),
    findings_total  integer     NOT NULL CHECK (findings_total >= 0),
    summary         jsonb       NOT NULL,
    findings        jsonb       NOT NULL,
    recorded_by     text        NOT NULL DEFAULT ''
);
CREATE INDEX audit_reports_newest ON audit_reports (audited_at DESC, id DESC);
