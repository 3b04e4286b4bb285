-- Runs of runtime schedules (activities/runtime.py). Tables: migration 0020.

-- name: schedule
SELECT id, tenant, name, kind, cron, timezone, params, start_at, end_at, deleted_at,
       depends_on
FROM runtime_schedules WHERE id = %(id)s

-- name: batch_slots
-- A batch's slots in order, after the first `after`, with what each one's run needs.
SELECT i.schedule_id, i.scheduled_at, i.origin, s.kind, s.params, s.deleted_at
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
