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

-- name: claim_and_take_over
-- A claim made inside the work's own transaction (`activities.run.begin`): the slot's row is
-- inserted already taken over by the asking attempt (fencing token 1, its holder and
-- order, journaled as every take-over is), and the transaction is named after it for the
-- outbox rows it writes (`activities.claim.journal`). A claim past the starting deadline is
-- inserted skipped, not taken over. Nothing when the slot has a row already.
WITH claimed AS (
    INSERT INTO job_executions
        (job_name, scheduled_at, status, origin, workflow_id, run_id, error, finished_at,
         alert_after_seconds, attempt, holder, holder_run_id, holder_activity_seq,
         holder_attempt)
    SELECT %(job_name)s, %(scheduled_at)s, %(status)s, %(origin)s, %(workflow_id)s,
           %(run_id)s, %(error)s, CASE WHEN running THEN NULL ELSE now() END,
           %(alert_after_seconds)s, CASE WHEN running THEN 1 ELSE 0 END,
           CASE WHEN running THEN %(holder)s END,
           CASE WHEN running THEN %(run_id_of_attempt)s::text END,
           CASE WHEN running THEN %(activity_seq)s::bigint END,
           CASE WHEN running THEN %(temporal_attempt)s::integer END
    FROM (SELECT %(status)s = 'running' AS running) AS claim
    ON CONFLICT (job_name, scheduled_at) DO NOTHING
    RETURNING id, status, attempt
), journaled AS (
    INSERT INTO commit_journal (execution_id, attempt, what, status)
    SELECT id, attempt, 'take_over', status FROM claimed WHERE status = 'running'
)
SELECT id, status, attempt,
       CASE WHEN status = 'running' THEN
           set_config('schedules.execution_id', id::text, true)
           || set_config('schedules.attempt', attempt::text, true)
       END
FROM claimed

-- name: lock_claim
SELECT id, status, error, run_id, result
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
-- A new attempt raises the fencing token, unless it comes before the holder's attempt: the
-- claim belongs to another workflow run, or the same run's holder was scheduled later (a
-- later activity, or a later Temporal attempt of the same one). An attempt woken in a
-- frozen worker after a newer one took over is refused, however many take-overs happened.
-- Without an attempt (NULL parameters: called outside an activity) nothing is compared.
UPDATE job_executions
SET attempt = attempt + 1, holder = %(holder)s, holder_run_id = %(run_id)s,
    holder_activity_seq = %(activity_seq)s, holder_attempt = %(temporal_attempt)s
WHERE id = %(id)s AND status = 'running'
  AND (%(claim_run_id)s::text IS NULL OR run_id IS NULL OR run_id = %(claim_run_id)s::text)
  AND (holder_run_id IS DISTINCT FROM %(run_id)s::text
       OR holder_activity_seq IS NULL OR %(activity_seq)s::bigint IS NULL
       OR (holder_activity_seq, holder_attempt)
          <= (%(activity_seq)s::bigint, %(temporal_attempt)s::integer))
RETURNING attempt, progress

-- name: holder
-- Why a take-over was refused or not needed.
SELECT status, result, workflow_id, run_id, holder_run_id, holder_activity_seq, holder_attempt
FROM job_executions WHERE id = %(id)s

-- name: attempt_took_over
-- Whether the given Temporal attempt of an activity is the one that last took the slot
-- over (false: it never reached the database, e.g. it sat in a frozen worker's poll).
SELECT holder_run_id = %(run_id)s AND holder_activity_seq = %(activity_seq)s
       AND holder_attempt >= %(temporal_attempt)s
FROM job_executions WHERE id = %(id)s

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

-- name: complete_and_journal
-- `complete`, and the commit journal's row of it (`activities.claim.journal.record`), at once.
WITH done AS (
    UPDATE job_executions
    SET status = 'completed', finished_at = now(), progress = %(progress)s,
        result = %(result)s, holder = NULL
    WHERE id = %(id)s
    RETURNING id, status, extract(epoch FROM finished_at - started_at) AS seconds
), journaled AS (
    INSERT INTO commit_journal (execution_id, attempt, what, status)
    SELECT id, %(attempt)s, 'complete', status FROM done
)
SELECT seconds FROM done

-- name: fail
-- Only the workflow run that holds the slot may mark it failed.
UPDATE job_executions
SET status = 'failed', finished_at = now(), error = %(error)s, holder = NULL,
    attempt = greatest(attempt, coalesce(%(attempts)s::integer, attempt))
WHERE id = %(id)s AND status = 'running' AND run_id = %(run_id)s
RETURNING job_name, scheduled_at

-- name: forget_steps
-- A compensated slot starts over: its steps' effects were undone, so each runs again.
DELETE FROM job_steps WHERE execution_id = %(id)s
