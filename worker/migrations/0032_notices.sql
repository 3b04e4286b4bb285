-- Notices that reach the owner (issue 40, item 4; docs/notices.md). Additive: the previous
-- release reads none of it.

-- Where a tenant's notices go: a webhook (signed per Standard Webhooks with `secret`) and
-- email addresses. A runtime schedule's notices go to its tenant's row; a catalog job's to
-- the row its `notify` names. `webhook_url` may carry a token and `secret` signs every
-- call: neither is ever logged, copied into an outbox row or shown without being asked.
CREATE TABLE notice_channels (
    tenant       text        PRIMARY KEY,
    webhook_url  text,
    emails       text[]      NOT NULL DEFAULT '{}',
    -- `whsec_` + base64 of 32 random bytes; kept when the channels change.
    secret       text        NOT NULL CHECK (secret LIKE 'whsec\_%'),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    updated_by   text        NOT NULL DEFAULT ''
);

-- Lost and late slots are found by `schedules audit --notify` (nothing records their absence
-- or lateness when it happens): each is recorded here once, with its notices queued in the
-- same transaction. Failed and auto-paused slots are recorded where they happen
-- (job_executions, schedule_pauses, runtime_schedule_changes) and need no row here.
CREATE TABLE slot_notices (
    job_name      text        NOT NULL,
    scheduled_at  timestamptz NOT NULL,
    event         text        NOT NULL CHECK (event IN ('lost', 'late')),
    detail        text        NOT NULL,
    found_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_name, scheduled_at, event)
);
