-- Slot dependencies (activities/dependencies/upstream.py). Tables: migration 0021.

-- name: upstream_rows
-- The upstream's ledger rows of the slots mapped onto ours: the upstream's truth.
SELECT scheduled_at, status, error FROM job_executions
WHERE job_name = %(job)s AND scheduled_at = ANY(%(slots)s::timestamptz[])

-- name: runtime_upstream
-- A runtime schedule named as an upstream: the tenant's live schedule of that name.
SELECT id, cron, timezone, start_at, end_at, timing_since, calendar_definition::text,
       on_holiday
FROM runtime_schedules
WHERE tenant = %(tenant)s AND name = %(name)s AND deleted_at IS NULL

-- name: record_wait
-- The wait's state as of this check; a later run of the same slot (a backfill after a
-- failure) starts its own wait over the earlier one's record.
INSERT INTO dependency_waits (
    execution_id, job_name, scheduled_at, workflow_id, run_id, upstreams, began_at,
    deadline, status, progress, detail, reason, checked_at, decided_at
) VALUES (
    %(execution_id)s, %(job_name)s, %(scheduled_at)s, %(workflow_id)s, %(run_id)s,
    %(upstreams)s, %(began_at)s, %(deadline)s, %(status)s, %(progress)s, %(detail)s,
    %(reason)s, %(now)s, CASE WHEN %(status)s = 'waiting' THEN NULL ELSE %(now)s END
)
ON CONFLICT (execution_id) DO UPDATE SET
    job_name = EXCLUDED.job_name, scheduled_at = EXCLUDED.scheduled_at,
    workflow_id = EXCLUDED.workflow_id, run_id = EXCLUDED.run_id,
    upstreams = EXCLUDED.upstreams, began_at = EXCLUDED.began_at,
    deadline = EXCLUDED.deadline, status = EXCLUDED.status, progress = EXCLUDED.progress,
    detail = EXCLUDED.detail, reason = EXCLUDED.reason, checked_at = EXCLUDED.checked_at,
    decided_at = EXCLUDED.decided_at
-- A decision of this run is final: a late poll of the same run changes nothing.
WHERE dependency_waits.run_id IS DISTINCT FROM EXCLUDED.run_id
   OR dependency_waits.status = 'waiting'

-- name: skip_slot
-- Our slot skipped by the dependency's policy; only by the run that holds it.
UPDATE job_executions
SET status = 'skipped', error = %(reason)s, finished_at = now(), holder = NULL
WHERE id = %(id)s AND status = 'running' AND run_id = %(run_id)s

-- name: cancel_wait
-- An operator cancelled the waiting run: the slot is failed (a backfill runs it again).
WITH failed AS (
    UPDATE job_executions
    SET status = 'failed', error = %(reason)s, finished_at = now(), holder = NULL
    WHERE id = %(id)s AND status = 'running' AND run_id = %(run_id)s
)
UPDATE dependency_waits
SET status = 'cancelled', reason = %(reason)s, decided_at = now(), checked_at = now()
WHERE execution_id = %(id)s AND run_id = %(run_id)s AND status = 'waiting'

-- name: waiting_on
-- The runs waiting on any of these upstreams (ledger names): whom to signal.
SELECT workflow_id, run_id FROM dependency_waits
WHERE status = 'waiting' AND upstreams && %(upstreams)s::text[]
