-- The weekly-cleanup job walks old rows oldest first; these keep each batch an index scan.
-- (Built inside the migration's transaction: on a large existing table, create them
-- CONCURRENTLY by hand first; IF NOT EXISTS then skips them here.)
CREATE INDEX IF NOT EXISTS outbox_messages_dispatched ON outbox_messages (dispatched_at)
    WHERE dispatched_at IS NOT NULL;

CREATE INDEX IF NOT EXISTS job_executions_finished ON job_executions (finished_at)
    WHERE status <> 'running';
