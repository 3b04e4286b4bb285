-- The dispatcher of runtime schedules (activities/runtime/dispatch.py). Tables: migration 0020.

-- name: due
-- The due runtime schedules of one shard (its `buckets`: activities/runtime/shards.py), locked for
-- this transaction; rows another dispatcher holds are passed over (two dispatchers whose
-- buckets meet split the work), and the lock re-checks that a row is still due: the
-- buckets only split the work, the row lock decides who takes a row.
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
    WHERE d.shard = ANY(%(buckets)s::smallint[]) AND d.next_fire_at <= %(now)s AND NOT d.paused
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
-- `tracked`: a slot of a tenant with an in-flight limit, counted until its run finishes
-- (settled_at NULL); any other is recorded settled.
INSERT INTO runtime_dispatch_intents
    (schedule_id, scheduled_at, decided_at, workflow_id, origin, requested_by, due_at,
     settled_at)
SELECT schedule_id, scheduled_at, %(now)s, workflow_id, origin, 'dispatcher', due_at,
       CASE WHEN tracked THEN NULL ELSE %(now)s END
FROM unnest(%(ids)s::bigint[], %(slots)s::timestamptz[], %(workflow_ids)s::text[],
            %(origins)s::text[], %(dues)s::timestamptz[], %(tracked)s::boolean[])
     AS t(schedule_id, scheduled_at, workflow_id, origin, due_at, tracked)
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
SET next_fire_at = t.next_fire_at, deferred_at = NULL, deferred_reason = NULL
FROM unnest(%(ids)s::bigint[], %(nexts)s::timestamptz[]) AS t(id, next_fire_at)
WHERE s.id = t.id

-- name: unstarted
-- Intents whose workflow no dispatcher has reported started (this tick's, or those of a
-- dispatcher that died between its commit and its starts), due by now (a slot a calendar
-- moved before its own time, `preceding`, is due at its due_at).
SELECT i.schedule_id, i.scheduled_at, i.origin, i.workflow_id, s.tenant, s.name, s.kind,
       s.timezone
FROM runtime_dispatch_intents i
JOIN runtime_schedules s ON s.id = i.schedule_id
WHERE s.shard = ANY(%(buckets)s::smallint[]) AND i.started_at IS NULL
  AND coalesce(i.due_at, i.scheduled_at) <= %(now)s
ORDER BY i.scheduled_at, i.schedule_id
LIMIT %(limit)s

-- name: shards_at
-- The number of dispatch shards in force for the tick scheduled at `now` (migration 0033).
SELECT shards FROM runtime_dispatch_shards WHERE from_tick <= %(now)s
ORDER BY from_tick DESC LIMIT 1

-- name: mark_started
UPDATE runtime_dispatch_intents
SET started_at = now()
WHERE workflow_id = ANY(%(workflow_ids)s) AND started_at IS NULL

-- name: intent
-- One slot's intent, for a trigger or a backfill (start_runtime_slot).
-- Not held back by a tenant limit, nor counted in flight (settled).
INSERT INTO runtime_dispatch_intents
    (schedule_id, scheduled_at, decided_at, workflow_id, origin, requested_by, settled_at)
VALUES (%(id)s, %(slot)s, now(), %(workflow_id)s, %(origin)s, %(requested_by)s, now())
ON CONFLICT (schedule_id, scheduled_at) DO NOTHING

-- name: schedule_labels
SELECT tenant, name, kind, deleted_at FROM runtime_schedules WHERE id = %(id)s

-- Tenant limits (issue 40; activities/runtime/tenant_limits.py).

-- name: tenant_limits
-- The own limits of the tenants of a batch (a tenant without a row takes the defaults).
SELECT tenant, max_in_flight, max_per_minute
FROM runtime_tenant_limits WHERE tenant = ANY(%(tenants)s::text[])

-- name: tenant_rows
-- A row for each limited tenant (a tenant limited by the defaults alone has none yet), in
-- tenant order, so two dispatchers inserting the same new tenants wait for each other
-- rather than deadlock.
INSERT INTO runtime_tenant_limits (tenant)
SELECT tenant FROM unnest(%(tenants)s::text[]) WITH ORDINALITY AS t(tenant, n) ORDER BY n
ON CONFLICT (tenant) DO NOTHING

-- name: lock_tenants
-- The limited tenants' rows, locked for the decide transaction in tenant order: a
-- dispatcher of another shard counting the same tenant's runs waits for this one's
-- decisions to commit. With the slots already started this minute.
SELECT tenant, max_in_flight, max_per_minute,
       CASE WHEN minute = %(minute)s THEN minute_starts ELSE 0 END AS started
FROM runtime_tenant_limits WHERE tenant = ANY(%(tenants)s::text[])
ORDER BY tenant
FOR UPDATE

-- name: settle
-- The limited tenants' intents whose run has finished (a terminal ledger row): no longer
-- in flight.
UPDATE runtime_dispatch_intents i
SET settled_at = now()
FROM runtime_schedules s, job_executions e
WHERE i.settled_at IS NULL AND s.id = i.schedule_id AND s.tenant = ANY(%(tenants)s::text[])
  AND e.job_name = 'rt-' || i.schedule_id AND e.scheduled_at = i.scheduled_at
  AND e.status <> 'running'

-- name: in_flight
-- The limited tenants' runs in flight: intents not settled (decided, started, running).
SELECT s.tenant, count(*) AS runs
FROM runtime_dispatch_intents i JOIN runtime_schedules s ON s.id = i.schedule_id
WHERE i.settled_at IS NULL AND s.tenant = ANY(%(tenants)s::text[])
GROUP BY s.tenant

-- name: count_starts
-- The slots each limited tenant started in this tick's minute.
UPDATE runtime_tenant_limits l
SET minute_starts = CASE WHEN l.minute = %(minute)s THEN l.minute_starts ELSE 0 END + t.n,
    minute = %(minute)s
FROM unnest(%(tenants)s::text[], %(counts)s::int[]) AS t(tenant, n)
WHERE l.tenant = t.tenant

-- name: defer
-- Schedules whose due slot a tenant limit holds back: left due (next_fire_at unchanged),
-- since when and why recorded for audit, check and explain.
UPDATE runtime_schedules s
SET deferred_at = coalesce(s.deferred_at, %(now)s), deferred_reason = t.reason
FROM unnest(%(ids)s::bigint[], %(reasons)s::text[]) AS t(id, reason)
WHERE s.id = t.id
