-- name: gauges
-- Read at scrape time by the worker's metrics (worker/gauges.py). The outbox counts use the
-- partial indexes outbox_messages_pending and outbox_messages_dead; last success and the
-- alert threshold are per job, from the execution record, so every replica reports the same
-- values and a restart loses nothing.
SELECT
    (SELECT count(*) FROM outbox_messages
     WHERE dispatched_at IS NULL AND dead_at IS NULL) AS outbox_pending,
    (SELECT count(*) FROM outbox_messages WHERE dead_at IS NOT NULL) AS outbox_dead,
    (SELECT coalesce(jsonb_object_agg(job_name, last_success), '{}'::jsonb)
     FROM (SELECT job_name, extract(epoch FROM max(finished_at))::float8 AS last_success
           FROM job_executions WHERE status = 'completed' AND job_name !~ '^rt-[0-9]+$'
           GROUP BY job_name) AS jobs
    ) AS last_success,
    (SELECT coalesce(jsonb_object_agg(job_name, alert_after), '{}'::jsonb)
     FROM (SELECT DISTINCT ON (job_name) job_name, alert_after_seconds AS alert_after
           FROM job_executions WHERE alert_after_seconds IS NOT NULL
           ORDER BY job_name, scheduled_at DESC) AS jobs
    ) AS alert_after,
    -- Runtime schedules (issue 21), by kind: those whose next slot is overdue, and those
    -- whose newest slot of the last day failed.
    (SELECT coalesce(jsonb_object_agg(kind, n), '{}'::jsonb)
     FROM (SELECT kind, count(*) AS n FROM runtime_schedules
           WHERE deleted_at IS NULL AND NOT paused
             AND next_fire_at < now() - interval '5 minutes' AND deferred_at IS NULL
           GROUP BY kind) AS kinds
    ) AS runtime_behind,
    (SELECT coalesce(jsonb_object_agg(kind, n), '{}'::jsonb)
     FROM (SELECT s.kind, count(DISTINCT s.id) AS n
           FROM job_executions e JOIN runtime_schedules s ON e.job_name = 'rt-' || s.id
           WHERE e.status = 'failed' AND e.job_name ~ '^rt-[0-9]+$'
             AND e.scheduled_at >= now() - interval '1 day' AND s.deleted_at IS NULL
             AND NOT EXISTS (SELECT 1 FROM job_executions later
                             WHERE later.job_name = e.job_name
                               AND later.scheduled_at > e.scheduled_at
                               AND later.status = 'completed')
           GROUP BY s.kind) AS kinds
    ) AS runtime_failing,
    -- Those whose due slot their tenant's limit defers (issue 40).
    (SELECT coalesce(jsonb_object_agg(kind, n), '{}'::jsonb)
     FROM (SELECT kind, count(*) AS n FROM runtime_schedules
           WHERE deleted_at IS NULL AND NOT paused AND deferred_at IS NOT NULL
           GROUP BY kind) AS kinds
    ) AS runtime_deferred
