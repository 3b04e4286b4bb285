-- Queries of the weekly-cleanup job (jobs/weekly_cleanup/activities.py). Each runs as one short batch
-- in its own fenced transaction: SKIP LOCKED never waits for rows another transaction
-- holds, and a batch locks at most `batch_size` rows.

-- name: delete_dispatched_outbox
-- Delivered messages older than the retention. Undelivered (dispatched_at IS NULL) and dead
-- messages are never touched.
DELETE FROM outbox_messages
WHERE id IN (
    SELECT id FROM outbox_messages
    WHERE dispatched_at IS NOT NULL AND dispatched_at < %(before)s
    ORDER BY dispatched_at
    LIMIT %(batch_size)s
    FOR UPDATE SKIP LOCKED
)

-- name: delete_old_executions
-- Finished executions older than the retention, never a running one, never this run's own,
-- and never a job's newest row: catch-up and `schedules check` read when each job last ran.
DELETE FROM job_executions
WHERE id IN (
    SELECT e.id FROM job_executions e
    WHERE e.finished_at < %(before)s
      AND e.status <> 'running'
      AND e.id <> %(own_id)s
      AND e.scheduled_at < (SELECT max(n.scheduled_at) FROM job_executions n
                            WHERE n.job_name = e.job_name)
    ORDER BY e.finished_at
    LIMIT %(batch_size)s
    FOR UPDATE OF e SKIP LOCKED
)
