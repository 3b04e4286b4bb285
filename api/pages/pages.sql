-- The dashboard's own reads (api/pages/reads.py); every write goes through the library
-- (schedules, schedules.tenants).

-- name: last_runs
-- The newest ledger row of each of these jobs (a runtime schedule's `rt-<id>`, a catalog
-- job's id), by the (job_name, scheduled_at DESC) index: one short index scan per job.
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

-- name: pauses_in_force
-- The recorded pause in force of each of these catalog jobs (schedules/pauses.py): who
-- paused it (`auto`: the engine, after repeated failures), when, and the operator.
SELECT job_name, paused_at, paused_by, requested_by, note FROM schedule_pauses
WHERE job_name = ANY(%(jobs)s::text[]) AND resumed_at IS NULL
