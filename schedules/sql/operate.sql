-- Queries of the operator commands (`python -m schedules list | describe`): read-only.

-- name: last_runs
-- The newest execution of each job: one index probe per job (job_executions_job_recent).
SELECT j.job_name, e.scheduled_at, e.status, e.attempt, e.origin, e.started_at,
       e.finished_at, e.error
FROM unnest(%(jobs)s::text[]) AS j(job_name)
CROSS JOIN LATERAL (
    SELECT scheduled_at, status, attempt, origin, started_at, finished_at, error
    FROM job_executions
    WHERE job_name = j.job_name
    ORDER BY scheduled_at DESC
    LIMIT 1
) AS e

-- name: recent_executions
SELECT scheduled_at, status, attempt, origin, workflow_id, started_at, finished_at,
       duplicate_runs, result -> 'counts' AS counts, error
FROM job_executions
WHERE job_name = %(job)s
ORDER BY scheduled_at DESC
LIMIT %(limit)s

-- name: execution_within
-- The first row of a slot in [start, end), for `explain`: one slot's (start, start + 1 µs),
-- or a manual or direct run's, whose slot is the time it was started at (to the
-- microsecond), for `explain --at` that second. With its wait for upstream slots, if it has
-- dependencies (docs/dependencies.md).
SELECT e.scheduled_at, e.status, e.attempt, e.origin, e.workflow_id, e.holder, e.started_at,
       e.finished_at, e.result, e.error, w.status AS wait_status, w.progress AS wait_progress,
       w.began_at AS wait_began_at, w.deadline AS wait_deadline,
       w.decided_at AS wait_decided_at, w.reason AS wait_reason
FROM job_executions e
LEFT JOIN dependency_waits w ON w.execution_id = e.id
WHERE e.job_name = %(job)s AND e.scheduled_at >= %(start)s AND e.scheduled_at < %(end)s
ORDER BY e.scheduled_at
LIMIT 1

-- name: execution_counts
-- How a job's recorded executions ended, and its newest success and failure, for `describe`.
SELECT count(*) FILTER (WHERE status = 'completed') AS completed,
       count(*) FILTER (WHERE status = 'failed') AS failed,
       count(*) FILTER (WHERE status = 'skipped') AS skipped,
       count(*) FILTER (WHERE status = 'compensated') AS compensated,
       count(*) FILTER (WHERE status = 'running') AS running,
       max(scheduled_at) FILTER (WHERE status = 'completed') AS last_success,
       max(scheduled_at) FILTER (WHERE status = 'failed') AS last_failure
FROM job_executions
WHERE job_name = %(job)s

-- name: edited_slot
-- What a timing edit decided for one slot it stranded (schedules/edits.py), for `explain`.
SELECT edited_at, was_due_at, due_at, outcome, reason FROM edited_slots
WHERE job_name = %(job)s AND scheduled_at = %(scheduled_at)s;
