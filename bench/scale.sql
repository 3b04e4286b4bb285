-- Rows bench/scale.py seeds so that `python -m schedules check` has a record to judge.

-- name: seed_completed
-- One completed run per job at the given slot, a minute long.
INSERT INTO job_executions
    (job_name, scheduled_at, status, origin, started_at, finished_at, workflow_id)
SELECT job_name, scheduled_at, 'completed', 'scheduled', scheduled_at,
       scheduled_at + interval '1 minute',
       job_name || '-bench'
FROM unnest(%(jobs)s::text[], %(slots)s::timestamptz[]) AS seed(job_name, scheduled_at)
ON CONFLICT (job_name, scheduled_at) DO NOTHING
