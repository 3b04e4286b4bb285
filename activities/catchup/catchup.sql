-- name: last_recorded
-- The newest slot of the job that has any record at all, up to now. Rows of the planning
-- workflow run itself are not looked at (here and below): an attempt that plans again after
-- an earlier one of the same run committed finds what that one found, and decides the same.
SELECT max(scheduled_at) FROM job_executions
WHERE job_name = %(job_name)s AND scheduled_at <= %(now)s
  AND run_id IS DISTINCT FROM %(run_id)s

-- name: recorded_between
SELECT scheduled_at FROM job_executions
WHERE job_name = %(job_name)s AND scheduled_at >= %(low)s AND scheduled_at <= %(high)s
  AND run_id IS DISTINCT FROM %(run_id)s

-- name: record_skipped
INSERT INTO job_executions
    (job_name, scheduled_at, status, origin, workflow_id, run_id, error, finished_at)
VALUES
    (%(job_name)s, %(scheduled_at)s, 'skipped', %(origin)s, %(workflow_id)s, %(run_id)s,
     %(reason)s, now())
ON CONFLICT (job_name, scheduled_at) DO NOTHING
