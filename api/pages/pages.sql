-- The dashboard's own reads (api/pages/views.py); every write goes through schedules.tenants.

-- name: last_runs
-- The newest ledger row of each of these runtime schedules (`rt-<id>`), by the
-- (job_name, scheduled_at DESC) index: one short index scan per schedule.
SELECT r.job_name, r.scheduled_at, r.status, r.origin, r.error
FROM unnest(%(jobs)s::text[]) AS j(job_name)
CROSS JOIN LATERAL (
    SELECT job_name, scheduled_at, status, origin, error FROM job_executions e
    WHERE e.job_name = j.job_name ORDER BY scheduled_at DESC LIMIT 1
) r

-- name: runs_among
-- The ledger rows of these slots of one runtime schedule: a backfill's outcomes.
SELECT scheduled_at, status, origin, attempt, error, result FROM job_executions
WHERE job_name = %(job)s AND scheduled_at = ANY(%(slots)s::timestamptz[])
