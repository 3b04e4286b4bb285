-- Queries of the steps of workflow jobs (activities/steps/record.py). A step's record lives under
-- its slot's execution; every write to it happens in a transaction fenced by the
-- execution's attempt (the fencing token).

-- name: begin
-- A new attempt at a step: the step's record, created on the first attempt. A finished
-- step keeps what it recorded; a running one is taken over by this attempt's token.
INSERT INTO job_steps (execution_id, step, attempt)
VALUES (%(id)s, %(step)s, %(attempt)s)
ON CONFLICT (execution_id, step) DO UPDATE
SET attempt = CASE WHEN job_steps.status = 'running' THEN excluded.attempt
                   ELSE job_steps.attempt END
RETURNING status, progress, result

-- name: save
UPDATE job_steps SET progress = %(progress)s
WHERE execution_id = %(id)s AND step = %(step)s

-- name: finish
UPDATE job_steps
SET status = 'completed', progress = %(progress)s, result = %(result)s, finished_at = now()
WHERE execution_id = %(id)s AND step = %(step)s

-- name: of_execution
-- What each step of an execution did, in the order the steps began.
SELECT step, status, result, attempt, started_at, finished_at
FROM job_steps WHERE execution_id = %(id)s
ORDER BY started_at, step

-- name: compensated
-- Only the workflow run that holds the slot may settle it.
UPDATE job_executions
SET status = %(status)s, finished_at = now(), error = %(error)s, result = %(result)s,
    holder = NULL
WHERE id = %(id)s AND status = 'running' AND run_id = %(run_id)s
RETURNING job_name
