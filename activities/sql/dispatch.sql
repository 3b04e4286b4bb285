-- The dispatcher of runtime schedules (activities/dispatch.py). Tables: migration 0020.

-- name: due
-- The due runtime schedules of one shard, locked for this transaction; rows another
-- dispatcher holds are passed over (two dispatchers on one shard split the work).
-- Fair (issue 40): taken round-robin across tenants, a tenant's `weight` slots a round
-- (its oldest first), so a tenant with thousands due cannot starve one with a single
-- slot. The rank needs a window function, which FOR UPDATE refuses at its own level: the
-- candidates are ranked in a subquery, then locked by id, SKIP LOCKED, in rank order (the
-- lock re-checks the row: one another dispatcher advanced meanwhile is left out).
-- `held`: tenants this tick found at their limit (left to the next tick).
-- A schedule with dependencies runs each slot on its own (its run waits for upstreams):
-- never in a batch, so its kind is left out of the batch grouping (NULL).
SELECT s.id, s.tenant, CASE WHEN s.depends_on = '[]'::jsonb THEN s.kind END AS kind, s.cron,
       s.timezone, s.catchup, s.max_missed, s.start_at, s.end_at, s.next_fire_at,
       s.timing_since, s.calendar_definition::text, s.on_holiday
FROM (
    SELECT d.id, d.next_fire_at,
           (row_number() OVER (PARTITION BY d.tenant ORDER BY d.next_fire_at, d.id) - 1)
               / coalesce(l.weight, 1) AS round
    FROM runtime_schedules d
    LEFT JOIN runtime_tenant_limits l ON l.tenant = d.tenant
    WHERE d.shard = %(shard)s AND d.next_fire_at <= %(now)s AND NOT d.paused
      AND d.deleted_at IS NULL AND d.tenant <> ALL(%(held)s::text[])
    ORDER BY round, d.next_fire_at, d.id
) fair
JOIN runtime_schedules s ON s.id = fair.id
WHERE s.next_fire_at <= %(now)s AND NOT s.paused AND s.deleted_at IS NULL
ORDER BY fair.round, fair.next_fire_at, fair.id
LIMIT %(limit)s
FOR UPDATE OF s SKIP LOCKED

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
