-- One row per (job, scheduled time): the claim that makes a job's effect happen once.
CREATE TABLE job_executions (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_name        text        NOT NULL,
    scheduled_at    timestamptz NOT NULL,
    status          text        NOT NULL DEFAULT 'running'
                    CHECK (status IN ('running', 'completed', 'failed', 'skipped')),
    -- Fencing token: raised by every attempt that takes the work over.
    attempt         integer     NOT NULL DEFAULT 0,
    trigger         text        NOT NULL DEFAULT 'schedule'
                    CHECK (trigger IN ('schedule', 'direct')),
    workflow_id     text,
    run_id          text,
    started_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz,
    error           text,
    -- Which worker process (host:pid) runs the current attempt.
    holder          text,
    -- Where a chunked run stopped, so a retry resumes instead of restarting.
    progress        jsonb       NOT NULL DEFAULT '{}'::jsonb,
    result          jsonb,
    -- Later runs of a slot that had already completed (backfill, manual re-run).
    duplicate_runs  integer     NOT NULL DEFAULT 0,
    last_duplicate_at timestamptz,
    UNIQUE (job_name, scheduled_at)
);

CREATE INDEX job_executions_job_recent ON job_executions (job_name, scheduled_at DESC);
