-- Pause on repeated failure (activities/claim/auto_pause.py). Tables: migrations 0019, 0030.

-- name: auto_pause_runtime
-- A runtime schedule with pause_after_failures = K whose K latest finished slots since its
-- last resume all failed: paused by 'auto', the note naming them and the last error, with
-- its change-log row as a pause's (the dispatcher's next slot in `before`, for the audit).
-- Run in the transaction that recorded the failure, after it.
WITH s AS (
    SELECT id, pause_after_failures AS k, next_fire_at
    FROM runtime_schedules
    WHERE id = %(id)s AND pause_after_failures IS NOT NULL AND NOT paused
      AND deleted_at IS NULL
    FOR UPDATE
), resumed AS (
    SELECT max(c.at) AS at
    FROM runtime_schedule_changes c JOIN s ON c.schedule_id = s.id
    WHERE c.action = 'resume'
), recent AS (
    SELECT e.scheduled_at, e.status, e.error
    FROM job_executions e
    WHERE e.job_name = %(job)s AND e.status IN ('completed', 'failed')
      AND e.finished_at > coalesce((SELECT at FROM resumed), '-infinity')
    ORDER BY e.scheduled_at DESC
    LIMIT coalesce((SELECT k FROM s), 0)
), verdict AS (
    SELECT s.id, s.next_fire_at,
           'auto-paused after ' || s.k || ' consecutive failed slot(s) ('
           || string_agg(to_char(r.scheduled_at AT TIME ZONE 'UTC',
                                 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), ', ' ORDER BY r.scheduled_at)
           || '); last error: '
           || left(coalesce((array_agg(r.error ORDER BY r.scheduled_at DESC))[1], ''), 300)
           AS note
    FROM s CROSS JOIN recent r
    GROUP BY s.id, s.k, s.next_fire_at
    HAVING count(*) = s.k AND bool_and(r.status = 'failed')
), paused AS (
    UPDATE runtime_schedules t
    SET paused = true, paused_note = v.note, paused_by = 'auto', version = t.version + 1,
        updated_at = now(), updated_by = 'auto', deferred_at = NULL, deferred_reason = NULL
    FROM verdict v
    WHERE t.id = v.id
    RETURNING t.id, v.note, v.next_fire_at
)
INSERT INTO runtime_schedule_changes (schedule_id, by, action, before, after)
SELECT id, 'auto', 'pause',
       jsonb_build_object('paused', false, 'next_fire_at', next_fire_at),
       jsonb_build_object('paused', true, 'note', note, 'paused_by', 'auto')
FROM paused
RETURNING schedule_id, after ->> 'note' AS note

-- name: catalog_streak
-- A catalog job's K latest finished slots since its last recorded resume, if all failed
-- and none of its pauses is in force: the note of its auto-pause (else no row).
WITH resumed AS (
    SELECT max(resumed_at) AS at FROM schedule_pauses WHERE job_name = %(job)s
), recent AS (
    SELECT scheduled_at, status, error
    FROM job_executions
    WHERE job_name = %(job)s AND status IN ('completed', 'failed', 'compensated')
      AND finished_at > coalesce((SELECT at FROM resumed), '-infinity')
    ORDER BY scheduled_at DESC
    LIMIT %(k)s
)
SELECT 'auto-paused after ' || %(k)s::integer || ' consecutive failed slot(s) ('
       || string_agg(to_char(scheduled_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
                     ', ' ORDER BY scheduled_at)
       || '); last error: '
       || left(coalesce((array_agg(error ORDER BY scheduled_at DESC))[1], ''), 300) AS note
FROM recent
HAVING count(*) = %(k)s AND bool_and(status <> 'completed')
   AND NOT EXISTS (SELECT 1 FROM schedule_pauses
                   WHERE job_name = %(job)s AND resumed_at IS NULL)

-- name: record_auto_pause
-- Recorded for the audit as `schedules pause` records its pauses (schedules/pauses.py).
INSERT INTO schedule_pauses (job_name, paused_at, paused_by, note, requested_by)
VALUES (%(job)s, now(), 'auto', %(note)s, 'auto')
ON CONFLICT (job_name) WHERE resumed_at IS NULL DO NOTHING
