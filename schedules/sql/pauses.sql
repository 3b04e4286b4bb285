-- Pauses made through this project's tooling (schedules/pauses.py), read by the audit.

-- name: record_pause
-- A pause begins; a job already under a recorded pause keeps the first one.
INSERT INTO schedule_pauses (job_name, paused_at, paused_by, note, requested_by)
VALUES (%(job)s, %(at)s, %(by)s, %(note)s, %(who)s)
ON CONFLICT (job_name) WHERE resumed_at IS NULL DO NOTHING

-- name: record_resume
-- The job's pause in force, if one is recorded, ends.
UPDATE schedule_pauses SET resumed_at = greatest(%(at)s, paused_at)
WHERE job_name = %(job)s AND resumed_at IS NULL

-- name: pause_in_force
-- The job's recorded pause still in force, if any: who paused it, how and when, for
-- `explain` and `next`.
SELECT paused_at, paused_by, requested_by, note FROM schedule_pauses
WHERE job_name = %(job)s AND resumed_at IS NULL
