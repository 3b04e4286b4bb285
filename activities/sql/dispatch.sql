-- The dispatcher of runtime schedules (activities/dispatch.py). Tables: migration 0020.

-- name: due
-- The due runtime schedules of one shard, locked for this transaction; rows another
-- dispatcher holds are passed over (two dispatchers on one shard split the work).
-- A schedule with dependencies runs each slot on its own (its run waits for upstreams):
-- never in a batch, so its kind is left out of the batch grouping (NULL).
SELECT id, CASE WHEN depends_on = '[]'::jsonb THEN kind END AS kind, cron, timezone, catchup,
       max_missed, start_at, end_at, next_fire_at, timing_since, calendar_definition::text,
       on_holiday
FROM runtime_schedules
WHERE shard = %(shard)s AND next_fire_at <= %(now)s AND NOT paused AND deleted_at IS NULL
ORDER BY next_fire_at, id
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED

-- name: record_intents
-- The slots decided to run, each with the workflow that runs it (its own, or a batch's)
-- and, for a slot a business calendar moved, when it is due; a slot already decided (by
-- a trigger, a backfill) keeps its intent.
INSERT INTO runtime_dispatch_intents
    (schedule_id, scheduled_at, decided_at, workflow_id, origin, requested_by, due_at)
SELECT schedule_id, scheduled_at, %(now)s, workflow_id, origin, 'dispatcher', due_at
FROM unnest(%(ids)s::bigint[], %(slots)s::timestamptz[], %(workflow_ids)s::text[],
            %(origins)s::text[], %(dues)s::timestamptz[])
     AS t(schedule_id, scheduled_at, workflow_id, origin, due_at)
ON CONFLICT (schedule_id, scheduled_at) DO NOTHING
RETURNING schedule_id, scheduled_at

-- name: record_skipped
-- Missed slots the catch-up policy does not run: one terminal row each, with the reason.
INSERT INTO job_executions
    (job_name, scheduled_at, status, origin, workflow_id, error, finished_at)
SELECT 'rt-' || schedule_id, scheduled_at, 'skipped', 'catch-up', workflow_id, reason, now()
FROM unnest(%(ids)s::bigint[], %(slots)s::timestamptz[], %(workflow_ids)s::text[],
            %(reasons)s::text[]) AS t(schedule_id, scheduled_at, workflow_id, reason)
ON CONFLICT (job_name, scheduled_at) DO NOTHING

-- name: advance
-- The next slot to dispatch (NULL: none left before end_at).
UPDATE runtime_schedules s
SET next_fire_at = t.next_fire_at
FROM unnest(%(ids)s::bigint[], %(nexts)s::timestamptz[]) AS t(id, next_fire_at)
WHERE s.id = t.id

-- name: unstarted
-- Intents whose workflow no dispatcher has reported started (this tick's, or those of a
-- dispatcher that died between its commit and its starts), due by now (a slot a calendar
-- moved before its own time, `preceding`, is due at its due_at).
SELECT i.schedule_id, i.scheduled_at, i.origin, i.workflow_id, s.tenant, s.name, s.kind
FROM runtime_dispatch_intents i
JOIN runtime_schedules s ON s.id = i.schedule_id
WHERE s.shard = %(shard)s AND i.started_at IS NULL
  AND coalesce(i.due_at, i.scheduled_at) <= %(now)s
ORDER BY i.scheduled_at, i.schedule_id
LIMIT %(limit)s

-- name: mark_started
UPDATE runtime_dispatch_intents
SET started_at = now()
WHERE workflow_id = ANY(%(workflow_ids)s) AND started_at IS NULL

-- name: intent
-- One slot's intent, for a trigger or a backfill (start_runtime_slot).
INSERT INTO runtime_dispatch_intents
    (schedule_id, scheduled_at, decided_at, workflow_id, origin, requested_by)
VALUES (%(id)s, %(slot)s, now(), %(workflow_id)s, %(origin)s, %(requested_by)s)
ON CONFLICT (schedule_id, scheduled_at) DO NOTHING

-- name: schedule_labels
SELECT tenant, name, kind, deleted_at FROM runtime_schedules WHERE id = %(id)s
