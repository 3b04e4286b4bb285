-- Runtime schedules (issue 21): schedules an application creates at runtime, one per
-- customer say, kept here as the one source of truth (never one Temporal schedule each).
-- `schedules.tenants` writes them; a few dispatcher jobs fan out their due slots, and each
-- (schedule, slot) runs under the ledger row `job_executions (job_name = 'rt-<id>',
-- scheduled_at)`, as a catalog job's slot does.
CREATE TABLE runtime_schedules (
    id            bigserial   PRIMARY KEY,
    tenant        text        NOT NULL,
    name          text        NOT NULL,
    -- A runtime kind (schedules/tenants/kinds.py); params are validated by its model.
    kind          text        NOT NULL,
    -- Minute granularity, the catalog's grammar (timing/cron.py), read in `timezone`.
    cron          text        NOT NULL,
    timezone      text        NOT NULL,
    params        jsonb       NOT NULL DEFAULT '{}',
    -- The catalog's catch-up vocabulary: 'all' needs max_missed.
    catchup       text        NOT NULL DEFAULT 'latest'
                              CHECK (catchup IN ('skip', 'latest', 'all')),
    max_missed    integer     CHECK (max_missed BETWEEN 1 AND 1000),
    start_at      timestamptz,
    end_at        timestamptz,
    paused        boolean     NOT NULL DEFAULT false,
    paused_note   text,
    paused_by     text,
    -- Optimistic concurrency: every write raises it; an update names the version it read.
    version       integer     NOT NULL DEFAULT 1,
    -- Soft delete: the row stays for the ledger, explain and the audit; a run in flight
    -- is never interrupted.
    deleted_at    timestamptz,
    -- id % SHARDS (schedules/tenants/store.py), fixed at insert: which dispatcher takes it.
    shard         smallint    NOT NULL CHECK (shard BETWEEN 0 AND 15),
    -- The next slot to dispatch (NULL: none, e.g. past end_at); the dispatcher advances it.
    next_fire_at  timestamptz,
    -- When the timing in force began: an edit applies to later fire times only.
    timing_since  timestamptz NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    created_by    text        NOT NULL DEFAULT '',
    updated_by    text        NOT NULL DEFAULT '',
    CHECK (start_at IS NULL OR end_at IS NULL OR start_at < end_at),
    CHECK ((catchup = 'all') = (max_missed IS NOT NULL))
);

CREATE UNIQUE INDEX runtime_schedules_name
    ON runtime_schedules (tenant, name) WHERE deleted_at IS NULL;
-- What a dispatcher of one shard reads each minute.
CREATE INDEX runtime_schedules_due
    ON runtime_schedules (shard, next_fire_at) WHERE deleted_at IS NULL AND NOT paused;
CREATE INDEX runtime_schedules_kind ON runtime_schedules (kind) WHERE deleted_at IS NULL;

-- Who changed what, when: one row per write, in the write's own transaction.
CREATE TABLE runtime_schedule_changes (
    id           bigserial   PRIMARY KEY,
    schedule_id  bigint      NOT NULL REFERENCES runtime_schedules (id),
    at           timestamptz NOT NULL DEFAULT now(),
    by           text        NOT NULL DEFAULT '',
    -- create, update, pause, resume, delete, trigger, backfill
    action       text        NOT NULL,
    before       jsonb,
    after        jsonb
);
CREATE INDEX runtime_schedule_changes_by_schedule
    ON runtime_schedule_changes (schedule_id, id);

-- A slot decided for a start: by the dispatcher (scheduled, catch-up), a trigger or a
-- backfill. started_at is set once its run was started; an intent that never started is
-- what the audit looks for.
CREATE TABLE runtime_dispatch_intents (
    schedule_id   bigint      NOT NULL REFERENCES runtime_schedules (id),
    scheduled_at  timestamptz NOT NULL,
    decided_at    timestamptz NOT NULL DEFAULT now(),
    started_at    timestamptz,
    -- rt-<id>-<slot UTC %Y-%m-%dT%H:%M:%SZ>
    workflow_id   text        NOT NULL,
    -- The ledger's vocabulary: scheduled, catch-up, manual, backfill.
    origin        text        NOT NULL DEFAULT 'scheduled',
    requested_by  text        NOT NULL DEFAULT '',
    PRIMARY KEY (schedule_id, scheduled_at)
);
CREATE INDEX runtime_dispatch_intents_unstarted
    ON runtime_dispatch_intents (decided_at) WHERE started_at IS NULL;
