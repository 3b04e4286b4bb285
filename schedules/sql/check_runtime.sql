-- `check` of runtime schedules (schedules/health/runtime.py), by kind, never by tenant.

-- name: behind
-- Active schedules whose next slot has been due longer than the dispatch lag: the
-- dispatcher of their shard is down or behind. A few ids as examples.
SELECT kind, count(*) AS schedules, min(next_fire_at) AS oldest,
       (array_agg(id ORDER BY next_fire_at, id))[1:5] AS examples
FROM runtime_schedules
WHERE deleted_at IS NULL AND NOT paused AND next_fire_at < %(due_before)s
  AND deferred_at IS NULL
GROUP BY kind ORDER BY kind

-- name: deferred
-- Tenants held at their limit (issue 40): schedules whose due slot is deferred, by tenant
-- (only limited tenants: a few), with the limit and the oldest wait.
SELECT tenant, count(*) AS schedules, min(next_fire_at) AS oldest,
       min(deferred_reason) AS reason, (array_agg(id ORDER BY next_fire_at, id))[1:5] AS examples
FROM runtime_schedules
WHERE deleted_at IS NULL AND NOT paused AND deferred_at IS NOT NULL
GROUP BY tenant ORDER BY tenant

-- name: unstarted
-- Starts decided longer than the dispatch lag ago and not made.
SELECT s.kind, count(*) AS intents, min(i.scheduled_at) AS oldest
FROM runtime_dispatch_intents i JOIN runtime_schedules s ON s.id = i.schedule_id
WHERE i.started_at IS NULL AND i.decided_at < %(due_before)s
GROUP BY s.kind ORDER BY s.kind

-- name: failing
-- Schedules whose newest slot in the lookback failed (no later slot completed).
SELECT s.kind, count(DISTINCT s.id) AS schedules,
       (array_agg(DISTINCT s.id))[1:5] AS examples
FROM job_executions e
JOIN runtime_schedules s ON e.job_name = 'rt-' || s.id
WHERE e.status = 'failed' AND e.job_name ~ '^rt-[0-9]+$' AND e.scheduled_at >= %(since)s
  AND s.deleted_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM job_executions later
                  WHERE later.job_name = e.job_name AND later.scheduled_at > e.scheduled_at
                    AND later.status = 'completed')
GROUP BY s.kind ORDER BY s.kind

-- name: overdue
-- Runs of runtime schedules still waiting for their upstream slots past their deadline.
SELECT s.kind, count(*) AS runs, min(w.deadline) AS oldest,
       (array_agg(s.id ORDER BY w.deadline, s.id))[1:5] AS examples
FROM dependency_waits w
JOIN runtime_schedules s ON w.job_name = 'rt-' || s.id
WHERE w.status = 'waiting' AND w.deadline <= %(now)s AND w.job_name ~ '^rt-[0-9]+$'
GROUP BY s.kind ORDER BY s.kind

-- name: slow
-- Slots still running longer than their kind's allowance after they were due (or were
-- claimed, when that came later): a lost worker's attempt not yet handed on, say. The
-- allowances come by kind (`RuntimeKind.allowance`); a slot waiting for its upstream slots
-- is `overdue`'s to judge, by its deadline.
WITH allowance AS (
    SELECT * FROM unnest(%(kinds)s::text[], %(seconds)s::float8[]) AS a(kind, seconds)
)
SELECT s.kind, count(*) AS runs, min(e.scheduled_at) AS oldest,
       (array_agg(s.id ORDER BY e.scheduled_at, s.id))[1:5] AS examples
FROM job_executions e
JOIN runtime_schedules s ON e.job_name = 'rt-' || s.id
LEFT JOIN allowance a ON a.kind = s.kind
WHERE e.status = 'running' AND e.job_name ~ '^rt-[0-9]+$'
  AND greatest(e.scheduled_at, e.started_at)
      + make_interval(secs => coalesce(a.seconds, %(default_seconds)s)) < %(now)s
  AND NOT EXISTS (SELECT 1 FROM dependency_waits w
                  WHERE w.execution_id = e.id AND w.status = 'waiting')
GROUP BY s.kind ORDER BY s.kind

-- name: auto_paused
-- Schedules paused after K consecutive failed slots (pause_after_failures, issue 40), by
-- kind, with the newest one's note (the slots, the last error).
SELECT kind, count(*) AS schedules, (array_agg(id ORDER BY updated_at DESC, id))[1:5] AS examples,
       (array_agg(paused_note ORDER BY updated_at DESC, id))[1] AS note
FROM runtime_schedules
WHERE paused AND paused_by = 'auto' AND deleted_at IS NULL
GROUP BY kind ORDER BY kind

-- name: catalog_auto_paused
-- Catalog jobs whose schedule was paused after K consecutive failed slots (their
-- `pause_after_failures`), the pause still in force (schedule_pauses, paused_by 'auto').
SELECT job_name, paused_at, note FROM schedule_pauses
WHERE paused_by = 'auto' AND resumed_at IS NULL
ORDER BY job_name
