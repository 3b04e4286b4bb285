-- Jobs with steps (workflow kinds): each step of a slot's run is recorded under the slot's
-- execution, with the same fencing token, so a retry or a later run of the slot resumes at
-- the first unfinished step and never repeats a finished one. A compensation is recorded
-- as a step of its own (`undo:<step>`).
CREATE TABLE job_steps (
    execution_id  bigint      NOT NULL REFERENCES job_executions (id) ON DELETE CASCADE,
    step          text        NOT NULL,
    status        text        NOT NULL DEFAULT 'running'
                  CHECK (status IN ('running', 'completed')),
    -- Where a step that works in batches stopped, so a retry resumes instead of restarting.
    progress      jsonb       NOT NULL DEFAULT '{}'::jsonb,
    -- What the finished step did: counts and ids only.
    result        jsonb,
    -- The fencing token (job_executions.attempt) of the attempt that last wrote the row.
    attempt       integer     NOT NULL,
    started_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz,
    PRIMARY KEY (execution_id, step)
);

-- A run whose step failed for good after earlier steps had effects ends `compensated`: the
-- completed steps' compensations ran (in reverse order) and the execution says which.
ALTER TABLE job_executions DROP CONSTRAINT job_executions_status_check;
ALTER TABLE job_executions ADD CONSTRAINT job_executions_status_check
    CHECK (status IN ('running', 'completed', 'failed', 'skipped', 'compensated'));
