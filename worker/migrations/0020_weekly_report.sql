-- The reference runtime kind `weekly-report` (jobs/weekly_report/, issue 21): customers,
-- what they did, and the report of each one's week, one per slot of its runtime schedule.
CREATE TABLE customers (
    id        bigserial PRIMARY KEY,
    -- The runtime schedules' owner: one customer per tenant.
    tenant    text      NOT NULL UNIQUE,
    name      text      NOT NULL,
    email     text      NOT NULL,
    timezone  text      NOT NULL
);

CREATE TABLE customer_activity (
    id            bigserial   PRIMARY KEY,
    customer_id   bigint      NOT NULL REFERENCES customers (id),
    occurred_at   timestamptz NOT NULL,
    kind          text        NOT NULL CHECK (kind IN ('login', 'order', 'refund')),
    amount_cents  bigint      NOT NULL DEFAULT 0
);
CREATE INDEX customer_activity_by_customer ON customer_activity (customer_id, occurred_at);

-- One report per slot (the execution that wrote it): a second write of a slot is refused.
CREATE TABLE weekly_reports (
    execution_id  bigint      PRIMARY KEY REFERENCES job_executions (id),
    customer_id   bigint      NOT NULL REFERENCES customers (id),
    week_start    timestamptz NOT NULL,
    week_end      timestamptz NOT NULL,
    logins        integer     NOT NULL,
    orders        integer     NOT NULL,
    net_cents     bigint      NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);
