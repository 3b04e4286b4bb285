-- Pauses made through this project's tooling (issue 18): Temporal keeps no pause history, so
-- `schedules pause` / `resume` and `sync` applying a catalog's `paused = true` record each
-- one here, and `schedules audit` does not expect fire times while a pause held. A pause
-- made in the Temporal UI is not recorded (docs/operating.md, Auditing the history).
CREATE TABLE schedule_pauses (
    id          bigserial   PRIMARY KEY,
    job_name    text        NOT NULL,
    paused_at   timestamptz NOT NULL,
    resumed_at  timestamptz,
    -- Who paused it: the `pause` command, or `sync` applying the catalog.
    paused_by   text        NOT NULL CHECK (paused_by IN ('pause', 'sync')),
    note        text,
    CHECK (resumed_at IS NULL OR resumed_at >= paused_at)
);
-- At most one pause in force per job: a second `pause` of a paused job keeps the first.
CREATE UNIQUE INDEX schedule_pauses_open ON schedule_pauses (job_name) WHERE resumed_at IS NULL;
CREATE INDEX schedule_pauses_by_job ON schedule_pauses (job_name, paused_at);
