-- Runtime schedules (worker/migrations/0019_runtime_schedules.sql): the statements of
-- schedules/tenants/store.py. Always bound parameters; bulk work set-based.

-- name: insert_logged
-- The row and its `create` change-log row in one statement; id and shard together (the
-- shard is its dispatch bucket, id modulo 16, fixed at insert: activities/runtime/shards.py).
WITH new AS (SELECT nextval(pg_get_serial_sequence('runtime_schedules', 'id')) AS id),
inserted AS (
    INSERT INTO runtime_schedules (
        id, tenant, name, kind, cron, timezone, params, catchup, max_missed, start_at,
        end_at, paused, paused_note, paused_by, shard, next_fire_at, timing_since,
        created_at, updated_at, created_by, updated_by, calendar, calendar_definition,
        on_holiday, depends_on
    )
    SELECT new.id, %(tenant)s, %(name)s, %(kind)s, %(cron)s, %(timezone)s, %(params)s,
           %(catchup)s, %(max_missed)s, %(start_at)s, %(end_at)s,
           %(paused)s, %(paused_note)s, %(paused_by)s, new.id %% %(shards)s,
           %(next_fire_at)s, %(timing_since)s, %(now)s, %(now)s, %(by)s, %(by)s,
           %(calendar)s, %(calendar_definition)s, %(on_holiday)s, %(depends_on)s
    FROM new
    ON CONFLICT (tenant, name) WHERE deleted_at IS NULL DO NOTHING
    RETURNING *
), logged AS (
    INSERT INTO runtime_schedule_changes (schedule_id, at, by, action, before, after)
    SELECT id, %(now)s, %(by)s, 'create', NULL, %(after)s FROM inserted
)
SELECT * FROM inserted

-- name: by_id
SELECT * FROM runtime_schedules WHERE id = %(id)s

-- name: live_by_name
SELECT * FROM runtime_schedules
WHERE tenant = %(tenant)s AND name = %(name)s AND deleted_at IS NULL

-- name: lock_by_id
SELECT * FROM runtime_schedules WHERE id = %(id)s FOR UPDATE

-- name: write
-- Every mutable column from the new state; the version goes up by one.
UPDATE runtime_schedules SET
    kind = %(kind)s, cron = %(cron)s, timezone = %(timezone)s, params = %(params)s,
    catchup = %(catchup)s, max_missed = %(max_missed)s, start_at = %(start_at)s,
    end_at = %(end_at)s, paused = %(paused)s, paused_note = %(paused_note)s,
    paused_by = %(paused_by)s, deleted_at = %(deleted_at)s, next_fire_at = %(next_fire_at)s,
    timing_since = %(timing_since)s, calendar = %(calendar)s,
    calendar_definition = %(calendar_definition)s, on_holiday = %(on_holiday)s,
    depends_on = %(depends_on)s, version = version + 1,
    updated_at = %(now)s, updated_by = %(by)s,
    -- A deferral (issue 40) is of the slot due: gone once the next slot moves or a pause.
    deferred_at = CASE WHEN next_fire_at IS DISTINCT FROM %(next_fire_at)s OR %(paused)s
                       THEN NULL ELSE deferred_at END,
    deferred_reason = CASE WHEN next_fire_at IS DISTINCT FROM %(next_fire_at)s OR %(paused)s
                           THEN NULL ELSE deferred_reason END
WHERE id = %(id)s
RETURNING *

-- name: log_change
INSERT INTO runtime_schedule_changes (schedule_id, at, by, action, before, after)
VALUES (%(schedule_id)s, %(now)s, %(by)s, %(action)s, %(before)s, %(after)s)

-- name: changes_of
SELECT id, schedule_id, at, by, action, before, after FROM runtime_schedule_changes
WHERE schedule_id = %(id)s ORDER BY id DESC LIMIT %(limit)s

-- name: dependents
-- The tenant's live schedules, other than these, that depend on one of these by name.
SELECT name FROM runtime_schedules
WHERE tenant = %(tenant)s AND deleted_at IS NULL AND name <> ALL(%(names)s::text[])
  AND EXISTS (SELECT 1 FROM jsonb_array_elements(depends_on) d
              WHERE d->>'schedule' = ANY(%(names)s::text[]))
ORDER BY name

-- name: lock_tenant
-- Writes that count or name a tenant's schedules one at a time (the quota is counted and
-- kept in one transaction): the tenant's lock is one of `buckets` advisory locks, by a
-- hash of its name, held to the end of the transaction. Tenants that share one wait for
-- each other, briefly; a write of any number of tenants holds a bounded number of locks.
SELECT pg_advisory_xact_lock(hashtext('runtime_schedules:tenants'),
                             (hashtext(%(tenant)s) & 2147483647) %% %(buckets)s)

-- name: lock_tenants
-- The locks of every tenant in `tenants` (at most `buckets`, whatever their number: an
-- import of 100,000 tenants cannot fill PostgreSQL's shared lock table), taken in order,
-- as every writer takes them: two writers never wait for each other in a circle.
SELECT count(*) AS locks FROM (
    SELECT pg_advisory_xact_lock(hashtext('runtime_schedules:tenants'), bucket)
    FROM (SELECT DISTINCT (hashtext(t) & 2147483647) %% %(buckets)s AS bucket
          FROM unnest(%(tenants)s::text[]) AS t
          ORDER BY bucket
          OFFSET 0) AS buckets
) AS locked

-- name: count_tenant
SELECT count(*) AS n FROM runtime_schedules WHERE tenant = %(tenant)s AND deleted_at IS NULL

-- name: list
-- Keyset paging by id; each filter applies when given.
SELECT * FROM runtime_schedules
WHERE deleted_at IS NULL
  AND id > %(after)s
  AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s)
  AND (%(kind)s::text IS NULL OR kind = %(kind)s)
  AND (%(paused)s::boolean IS NULL OR paused = %(paused)s)
  AND (%(due)s::timestamptz IS NULL OR (NOT paused AND next_fire_at <= %(due)s))
ORDER BY id
LIMIT %(limit)s

-- name: tenant_live
SELECT * FROM runtime_schedules
WHERE tenant = %(tenant)s AND deleted_at IS NULL
ORDER BY name
FOR UPDATE

-- name: tenant_linked
-- The tenant's live schedules in its dependency graph, all a dependency check needs: those
-- that depend on another, those another depends on, and those `names` names (a write's own
-- upstreams). A tenant's thousands of plain schedules are not read.
WITH referenced AS (
    SELECT DISTINCT d->>'schedule' AS name
    FROM runtime_schedules r, jsonb_array_elements(r.depends_on) d
    WHERE r.tenant = %(tenant)s AND r.deleted_at IS NULL AND r.depends_on <> '[]'::jsonb
)
SELECT * FROM runtime_schedules s
WHERE s.tenant = %(tenant)s AND s.deleted_at IS NULL
  AND (s.depends_on <> '[]'::jsonb OR s.name = ANY(%(names)s::text[])
       OR s.name IN (SELECT name FROM referenced))
ORDER BY s.name

-- name: add_intent
-- A slot its business calendar moved is due at its fire time (due_at; NULL: its own).
-- A trigger's or backfill's slot is not held back by a tenant limit, nor counted in
-- flight (recorded settled).
-- Each recorded intent comes back with its schedule's labels (`activities.runtime.start.
-- Intent`), what a start of its run needs.
WITH added AS (
    INSERT INTO runtime_dispatch_intents (
        schedule_id, scheduled_at, decided_at, workflow_id, origin, requested_by, due_at,
        settled_at
    )
    SELECT %(schedule_id)s, t.at, %(now)s, t.workflow_id, %(origin)s, %(by)s, t.due_at,
           %(now)s
    FROM unnest(%(slots)s::timestamptz[], %(workflow_ids)s::text[], %(dues)s::timestamptz[])
         AS t (at, workflow_id, due_at)
    ON CONFLICT (schedule_id, scheduled_at) DO NOTHING
    RETURNING schedule_id, scheduled_at, decided_at, started_at, workflow_id, origin
)
SELECT a.schedule_id, a.scheduled_at, a.origin, a.workflow_id, s.tenant, s.name, s.kind,
       s.timezone, a.decided_at, a.started_at
FROM added a JOIN runtime_schedules s ON s.id = a.schedule_id
ORDER BY a.scheduled_at

-- name: mark_started
-- A triggered slot whose run the API started itself (a tick would mark it too).
UPDATE runtime_dispatch_intents SET started_at = now()
WHERE schedule_id = %(schedule_id)s AND scheduled_at = %(slot)s AND started_at IS NULL
RETURNING started_at

-- name: intents_among
-- Which of these slots have an intent already (what a dry-run backfill would leave alone).
SELECT scheduled_at FROM runtime_dispatch_intents
WHERE schedule_id = %(schedule_id)s AND scheduled_at = ANY(%(slots)s::timestamptz[])

-- name: intent_at
SELECT * FROM runtime_dispatch_intents
WHERE schedule_id = %(id)s AND scheduled_at = %(slot)s

-- name: execution_at
-- With its wait for upstream slots, if it has dependencies (docs/dependencies.md).
SELECT e.id, e.job_name, e.scheduled_at, e.status, e.attempt, e.origin, e.started_at,
       e.finished_at, e.error, w.status AS wait_status, w.progress AS wait_progress,
       w.deadline AS wait_deadline, w.reason AS wait_reason
FROM job_executions e LEFT JOIN dependency_waits w ON w.execution_id = e.id
WHERE e.job_name = %(job)s AND e.scheduled_at = %(slot)s

-- name: runs
SELECT id, scheduled_at, status, attempt, origin, started_at, finished_at, error, result
FROM job_executions
WHERE job_name = %(job)s AND (%(before)s::timestamptz IS NULL OR scheduled_at < %(before)s)
ORDER BY scheduled_at DESC
LIMIT %(limit)s

-- name: import_table
CREATE TEMP TABLE runtime_import (
    line integer, tenant text, name text, kind text, cron text, timezone text,
    params jsonb, catchup text, max_missed integer, start_at timestamptz,
    end_at timestamptz, paused boolean, paused_note text, next_fire_at timestamptz,
    calendar text, calendar_definition jsonb, on_holiday text, depends_on jsonb
) ON COMMIT DROP

-- name: import_copy
COPY runtime_import (
    line, tenant, name, kind, cron, timezone, params, catchup, max_missed, start_at,
    end_at, paused, paused_note, next_fire_at, calendar, calendar_definition, on_holiday,
    depends_on
) FROM STDIN

-- name: import_conflicts
-- Lines naming a live schedule whose definition differs (pause state aside).
SELECT i.line, i.tenant, i.name, s.id
FROM runtime_import i
JOIN runtime_schedules s ON s.tenant = i.tenant AND s.name = i.name AND s.deleted_at IS NULL
WHERE (s.kind, s.cron, s.timezone, s.params, s.catchup, s.start_at, s.end_at, s.depends_on)
      IS DISTINCT FROM (i.kind, i.cron, i.timezone, i.params, i.catchup, i.start_at, i.end_at,
                        i.depends_on)
   OR s.max_missed IS DISTINCT FROM i.max_missed
   OR (s.calendar, s.calendar_definition, s.on_holiday)
      IS DISTINCT FROM (i.calendar, i.calendar_definition, i.on_holiday)
ORDER BY i.line
LIMIT 20

-- name: import_counts
-- Per tenant: live schedules, and lines that would add one.
SELECT i.tenant,
       (SELECT count(*) FROM runtime_schedules s
        WHERE s.tenant = i.tenant AND s.deleted_at IS NULL) AS stored,
       count(*) FILTER (WHERE NOT EXISTS (
           SELECT 1 FROM runtime_schedules s
           WHERE s.tenant = i.tenant AND s.name = i.name AND s.deleted_at IS NULL)) AS adding
FROM runtime_import i
GROUP BY i.tenant

-- name: import_insert
WITH fresh AS (
    SELECT i.*, nextval(pg_get_serial_sequence('runtime_schedules', 'id')) AS id
    FROM runtime_import i
    WHERE NOT EXISTS (
        SELECT 1 FROM runtime_schedules s
        WHERE s.tenant = i.tenant AND s.name = i.name AND s.deleted_at IS NULL)
    ORDER BY i.line
), inserted AS (
    INSERT INTO runtime_schedules (
        id, tenant, name, kind, cron, timezone, params, catchup, max_missed, start_at,
        end_at, paused, paused_note, paused_by, shard, next_fire_at, timing_since,
        created_at, updated_at, created_by, updated_by, calendar, calendar_definition,
        on_holiday, depends_on
    )
    SELECT id, tenant, name, kind, cron, timezone, params, catchup, max_missed, start_at,
           end_at, paused, paused_note, CASE WHEN paused THEN %(by)s END,
           id %% %(shards)s, next_fire_at, %(now)s, %(now)s, %(now)s, %(by)s, %(by)s,
           calendar, calendar_definition, on_holiday, depends_on
    FROM fresh
    ON CONFLICT (tenant, name) WHERE deleted_at IS NULL DO NOTHING
    RETURNING *
)
INSERT INTO runtime_schedule_changes (schedule_id, at, by, action, before, after)
SELECT id, %(now)s, %(by)s, 'create', NULL,
       jsonb_build_object('tenant', tenant, 'name', name, 'kind', kind, 'cron', cron,
                          'timezone', timezone, 'params', params, 'catchup', catchup,
                          'max_missed', max_missed, 'start_at', start_at, 'end_at', end_at,
                          'paused', paused, 'note', paused_note, 'calendar', calendar,
                          'on_holiday', on_holiday, 'depends_on', depends_on,
                          'source', 'import')
FROM inserted

-- name: export
SELECT * FROM runtime_schedules
WHERE deleted_at IS NULL AND id > %(after)s
  AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s)
ORDER BY id
LIMIT %(limit)s

-- name: edited_slot
-- What a timing edit decided for a slot it stranded (schedules/edits.py), for `explain`.
SELECT edited_at, was_due_at, due_at, outcome, reason FROM edited_slots
WHERE job_name = %(job)s AND scheduled_at = %(slot)s

-- Tenant limits (issue 40; schedules/tenants/limits.py).

-- name: tenant_limits
SELECT tenant, max_in_flight, max_per_minute, weight, updated_at, updated_by
FROM runtime_tenant_limits WHERE tenant = %(tenant)s

-- name: set_tenant_limits
-- The given settings (NULL: left as stored; a new tenant's row takes the defaults).
INSERT INTO runtime_tenant_limits
    (tenant, max_in_flight, max_per_minute, weight, updated_at, updated_by)
VALUES (%(tenant)s, %(max_in_flight)s, %(max_per_minute)s, coalesce(%(weight)s, 1), now(),
        %(by)s)
ON CONFLICT (tenant) DO UPDATE
SET max_in_flight = coalesce(EXCLUDED.max_in_flight, runtime_tenant_limits.max_in_flight),
    max_per_minute = coalesce(EXCLUDED.max_per_minute, runtime_tenant_limits.max_per_minute),
    weight = coalesce(%(weight)s, runtime_tenant_limits.weight),
    updated_at = now(), updated_by = EXCLUDED.updated_by
RETURNING tenant, max_in_flight, max_per_minute, weight, updated_at, updated_by

-- name: clear_tenant_limits
-- Back to the defaults (the row stays: the dispatcher's count for the minute is on it).
UPDATE runtime_tenant_limits
SET max_in_flight = NULL, max_per_minute = NULL, weight = 1, updated_at = now(),
    updated_by = %(by)s
WHERE tenant = %(tenant)s
RETURNING tenant

-- name: tenant_in_flight
-- The tenant's runs in flight as the dispatcher counts them (intents not settled), and
-- its schedules deferred by its limits.
SELECT (SELECT count(*) FROM runtime_dispatch_intents i
        JOIN runtime_schedules s ON s.id = i.schedule_id
        WHERE i.settled_at IS NULL AND s.tenant = %(tenant)s) AS in_flight,
       (SELECT count(*) FROM runtime_schedules
        WHERE tenant = %(tenant)s AND deferred_at IS NOT NULL AND deleted_at IS NULL)
           AS deferred

-- name: set_pause_after_failures
-- Pause on repeated failure (issue 40): K consecutive failed slots pause the schedule
-- (activities/claim/auto_pause.sql); NULL: never. Logged as an update.
WITH old AS (
    SELECT id, pause_after_failures FROM runtime_schedules
    WHERE id = %(id)s AND deleted_at IS NULL FOR UPDATE
), new AS (
    UPDATE runtime_schedules s
    SET pause_after_failures = %(k)s, version = s.version + 1, updated_at = now(),
        updated_by = %(by)s
    FROM old WHERE s.id = old.id
    RETURNING s.id, old.pause_after_failures AS before
)
INSERT INTO runtime_schedule_changes (schedule_id, by, action, before, after)
SELECT id, %(by)s, 'update', jsonb_build_object('pause_after_failures', before),
       jsonb_build_object('pause_after_failures', %(k)s::integer)
FROM new
RETURNING schedule_id
