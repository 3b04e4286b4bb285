-- Backfills asked for through this project's tooling (schedules/backfills.py), for the audit.

-- name: record_backfill
INSERT INTO backfill_requests (job_name, requested_at, range_start, range_end, slots)
VALUES (%(job)s, %(at)s, %(start)s, %(end)s, %(slots)s::timestamptz[])
