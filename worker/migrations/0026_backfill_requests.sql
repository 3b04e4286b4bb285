-- Backfills asked for through this project's tooling (issue 36): the server keeps no record
-- of a request it drops, and the audit judges the fire times of a job's current timing only,
-- so a dropped backfill of slots before that timing took effect left no trace. `schedules
-- backfill` records each request here, with the slots it asks for, before it is sent;
-- `schedules audit` expects a ledger row for every slot asked for (docs/operating.md).
CREATE TABLE backfill_requests (
    id            bigserial     PRIMARY KEY,
    job_name      text          NOT NULL,
    requested_at  timestamptz   NOT NULL,
    -- The range asked for, [range_start, range_end), and its fire times (at most 1,000).
    range_start   timestamptz   NOT NULL,
    range_end     timestamptz   NOT NULL,
    slots         timestamptz[] NOT NULL,
    CHECK (range_start < range_end)
);
CREATE INDEX backfill_requests_by_job ON backfill_requests (job_name, range_start);
