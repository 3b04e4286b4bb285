-- Runs of runtime schedules (activities/runtime/runs.py). Tables: migration 0020.

-- name: schedule
-- A slot's schedule, and when the slot is due if its business calendar moved it (its
-- intent's due_at; NULL: at its own time).
SELECT id, tenant, name, kind, cron, timezone, params, start_at, end_at, deleted_at,
       depends_on,
       (SELECT due_at FROM runtime_dispatch_intents
        WHERE schedule_id = %(id)s AND scheduled_at = %(slot)s) AS due_at
FROM runtime_schedules WHERE id = %(id)s

-- name: batch_slots
-- A batch's slots in order, after the first `after`, with what each one's run needs.
SELECT i.schedule_id, i.scheduled_at, i.origin, s.kind, s.params, s.deleted_at, i.due_at
FROM runtime_dispatch_intents i
JOIN runtime_schedules s ON s.id = i.schedule_id
WHERE i.workflow_id = %(batch_id)s
ORDER BY i.scheduled_at, i.schedule_id
OFFSET %(after)s LIMIT %(limit)s

-- name: settled
-- The slot's ledger row, if it is settled already (completed, skipped): nothing to do.
SELECT id, status FROM job_executions
WHERE job_name = %(job_name)s AND scheduled_at = %(scheduled_at)s
  AND status IN ('completed', 'skipped')

-- name: claim_batch
-- A batch's slots that have no ledger row yet, claimed and taken over in ONE statement
-- (activities/runtime/batch.py): a running row per slot under this activity attempt's
-- fencing token (1) and take-over order (the `take_over` columns), each take-over
-- journaled as the table's trigger journals a raised token. A slot whose row exists is
-- left alone (ON CONFLICT, waiting for an attempt that holds it uncommitted): the caller
-- claims it one by one.
WITH claimed AS (
    INSERT INTO job_executions
        (job_name, scheduled_at, status, origin, workflow_id, run_id, attempt, holder,
         holder_run_id, holder_activity_seq, holder_attempt)
    SELECT t.job_name, t.scheduled_at, 'running', t.origin, %(workflow_id)s, %(run_id)s, 1,
           %(holder)s, %(run_id)s, %(activity_seq)s, %(temporal_attempt)s
    FROM unnest(%(jobs)s::text[], %(slots)s::timestamptz[], %(origins)s::text[])
         AS t(job_name, scheduled_at, origin)
    ORDER BY t.scheduled_at, t.job_name
    ON CONFLICT (job_name, scheduled_at) DO NOTHING
    RETURNING id, job_name, scheduled_at, attempt, status
), journaled AS (
    INSERT INTO commit_journal (execution_id, attempt, what, status)
    SELECT id, attempt, 'take_over', status FROM claimed
)
SELECT id, job_name, scheduled_at, attempt FROM claimed

-- name: complete_batch
-- The slots `claim_batch` took, completed with their counts and journaled under their
-- tokens, in ONE statement; each one's duration since its claim.
WITH done AS (
    UPDATE job_executions e
    SET status = 'completed', finished_at = now(), progress = t.result, result = t.result,
        holder = NULL
    FROM unnest(%(ids)s::bigint[], %(results)s::jsonb[]) AS t(id, result)
    WHERE e.id = t.id AND e.status = 'running'
    RETURNING e.id, e.attempt, e.status, extract(epoch FROM e.finished_at - e.started_at) AS s
), journaled AS (
    INSERT INTO commit_journal (execution_id, attempt, what, status)
    SELECT id, attempt, 'complete', status FROM done
)
SELECT id, s FROM done
