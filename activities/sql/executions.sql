-- name: insert_claim
INSERT INTO job_executions
    (job_name, scheduled_at, status, origin, workflow_id, run_id, error, finished_at,
     alert_after_seconds)
VALUES
    (%(job_name)s, %(scheduled_at)s, %(status)s, %(origin)s, %(workflow_id)s, %(run_id)s,
     %(error)s, CASE WHEN %(status)s = 'running' THEN NULL ELSE now() END,
     %(alert_after_seconds)s)
ON CONFLICT (job_name, scheduled_at) DO NOTHING
RETURNING id, status

-- name: lock_claim
SELECT id, status, error
FROM job_executions
WHERE job_name = %(job_name)s AND scheduled_at = %(scheduled_at)s
FOR UPDATE

-- name: record_duplicate
UPDATE job_executions
SET duplicate_runs = duplicate_runs + 1, last_duplicate_at = now()
WHERE id = %(id)s

-- name: reclaim
-- A failed slot is retried; a running one passes to the newest workflow run, whose work
-- activity will take it over with a higher fencing token.
UPDATE job_executions
SET status = 'running', error = NULL, finished_at = NULL,
    workflow_id = %(workflow_id)s, run_id = %(run_id)s,
    alert_after_seconds = coalesce(%(alert_after_seconds)s, alert_after_seconds),
    started_at = CASE WHEN status IN ('failed', 'compensated') THEN now() ELSE started_at END
WHERE id = %(id)s

-- name: take_over
UPDATE job_executions
SET attempt = attempt + 1, holder = %(holder)s
WHERE id = %(id)s AND status = 'running'
RETURNING attempt, progress

-- name: status
SELECT status, result, error FROM job_executions WHERE id = %(id)s

-- name: fence
SELECT attempt, status FROM job_executions WHERE id = %(id)s FOR UPDATE

-- name: save_progress
UPDATE job_executions SET progress = %(progress)s WHERE id = %(id)s

-- name: complete
UPDATE job_executions
SET status = 'completed', finished_at = now(), progress = %(progress)s, result = %(result)s,
    holder = NULL
WHERE id = %(id)s
RETURNING extract(epoch FROM finished_at - started_at)

-- name: fail
-- Only the workflow run that holds the slot may mark it failed.
UPDATE job_executions
SET status = 'failed', finished_at = now(), error = %(error)s, holder = NULL
WHERE id = %(id)s AND status = 'running' AND run_id = %(run_id)s
RETURNING job_name

-- name: forget_steps
-- A compensated slot starts over: its steps' effects were undone, so each runs again.
DELETE FROM job_steps WHERE execution_id = %(id)s
