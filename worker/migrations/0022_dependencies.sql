-- Slot dependencies (issue 23, docs/dependencies.md): a slot whose job names upstream jobs
-- waits, after its claim and before its work, until the upstream slots mapped onto it have
-- completed (the ledger is the upstream's truth), or its policy decides at a failure or
-- a deadline.

-- One row per waiting (or waited) slot, written by each readiness check of the run that
-- holds the slot (activities/upstream.py): `check` alerts on a wait past its deadline,
-- `explain` shows it, the audit reads its decision (a run anyway by policy).
CREATE TABLE dependency_waits (
    execution_id  bigint      PRIMARY KEY REFERENCES job_executions (id) ON DELETE CASCADE,
    job_name      text        NOT NULL,
    scheduled_at  timestamptz NOT NULL,
    workflow_id   text        NOT NULL,
    run_id        text        NOT NULL,
    -- The upstreams' ledger names (job_executions.job_name): whom a settled slot releases.
    upstreams     text[]      NOT NULL,
    -- When the run began to wait; the deadline: `within` after max(slot, began_at) (the
    -- earliest of its dependencies still outstanding at the last check).
    began_at      timestamptz NOT NULL,
    deadline      timestamptz NOT NULL,
    -- waiting; ready (all done); skipped, run_anyway (a policy decided); cancelled.
    status        text        NOT NULL
                  CHECK (status IN ('waiting', 'ready', 'skipped', 'run_anyway', 'cancelled')),
    -- What the Temporal UI shows: "waiting for hourly-sync ..., 21 of 24 done".
    progress      text        NOT NULL DEFAULT '',
    -- Per dependency: the upstream, its mapped, done, pending and failed slots.
    detail        jsonb       NOT NULL DEFAULT '[]',
    reason        text,
    checked_at    timestamptz NOT NULL,
    decided_at    timestamptz
);
CREATE INDEX dependency_waits_waiting ON dependency_waits USING gin (upstreams)
    WHERE status = 'waiting';
CREATE INDEX dependency_waits_by_slot ON dependency_waits (job_name, scheduled_at);

-- A runtime schedule's dependencies: [{"job" or "schedule", "slots", "within" (ISO 8601),
-- "on_failure"}], validated by schedules/tenants (docs/dependencies.md).
ALTER TABLE runtime_schedules ADD COLUMN depends_on jsonb NOT NULL DEFAULT '[]';

-- When a slot settles (completed, failed, compensated, skipped) and some run waits on its
-- job, every worker listening hears of it and signals those runs (worker/release.py): they
-- check again at once instead of at their next poll. A row per settle pays one index probe
-- of the (small) set of waiting rows; nothing is sent when nobody waits.
CREATE FUNCTION job_executions_notify_settled() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM dependency_waits
               WHERE status = 'waiting' AND upstreams @> ARRAY[NEW.job_name]) THEN
        PERFORM pg_notify('upstream_settled', NEW.job_name);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER job_executions_settled
    AFTER UPDATE OF status ON job_executions
    FOR EACH ROW WHEN (NEW.status <> 'running' AND NEW.status IS DISTINCT FROM OLD.status)
    EXECUTE FUNCTION job_executions_notify_settled();

CREATE TRIGGER job_executions_inserted_settled
    AFTER INSERT ON job_executions
    FOR EACH ROW WHEN (NEW.status <> 'running')
    EXECUTE FUNCTION job_executions_notify_settled();
