-- The audit of runtime schedules (schedules/audit/runtime.py). Read-only.

-- name: schedules
-- Every runtime schedule that could have fired in the window (deleted ones included:
-- their slots before the delete are judged).
-- A schedule its tenant's limit holds back (deferred_at, issue 40): its slots from
-- next_fire_at on are deferred, not yet decided.
SELECT id, tenant, name, kind, cron, timezone, start_at, end_at, paused, deleted_at,
       timing_since, calendar_definition, on_holiday, depends_on, next_fire_at, deferred_at,
       deferred_reason
FROM runtime_schedules
WHERE (deleted_at IS NULL OR deleted_at >= %(from)s) AND timing_since < %(to)s
ORDER BY id

-- name: pauses
-- Each schedule's pauses, from its change log: [paused at, resumed at) (open: still paused),
-- and its delete; with the dispatcher's next slot as the pause or delete found it (`decided`:
-- recorded, by writes since issue 36; `next_fire_at` NULL then: every slot was decided).
-- A schedule created paused (`paused: true` in the create's definition) is paused from its
-- creation: its create row opens the pause (nothing was decided before it).
SELECT schedule_id, action, at, coalesce(before ? 'next_fire_at', false) AS decided,
       (before->>'next_fire_at')::timestamptz AS next_fire_at
FROM runtime_schedule_changes
WHERE (action IN ('pause', 'resume', 'delete')
       OR (action = 'create' AND coalesce((after->>'paused')::boolean, false)))
  AND schedule_id = ANY(%(ids)s)
ORDER BY schedule_id, id

-- name: intents
-- Intents older than --settle that no run took up: never marked started, or started with
-- no ledger row for their slot.
SELECT i.schedule_id, i.scheduled_at, i.decided_at, i.started_at, i.workflow_id, i.origin
FROM runtime_dispatch_intents i
LEFT JOIN job_executions e
       ON e.job_name = 'rt-' || i.schedule_id AND e.scheduled_at = i.scheduled_at
WHERE i.decided_at < %(settled)s AND i.scheduled_at >= %(from)s AND i.scheduled_at < %(to)s
  AND e.id IS NULL
ORDER BY i.schedule_id, i.scheduled_at
