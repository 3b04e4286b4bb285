-- Read-only queries of `python -m schedules check` (schedules/check.py).

-- name: executions
-- Per job, the rows the health check judges: every row of the lookback (newest first, up
-- to max_rows), the last `history` completed runs (the duration baseline), the last finished
-- run, the newest and the oldest row, and catch-up gaps recorded during the lookback for
-- older fire times. A pick is the newest `n` rows since `since` with a status in `statuses`
-- (NULL: any); it and the oldest row are each a short index scan on (job_name, scheduled_at).
WITH jobs AS (
    SELECT unnest(%(jobs)s::text[]) AS job_name
), picks (since, statuses, n) AS (
    VALUES (%(since)s::timestamptz, NULL::text[], %(max_rows)s::bigint),
           ('-infinity', '{completed}', %(history)s::bigint),
           ('-infinity', '{completed,failed,compensated}', 1),
           ('-infinity', NULL, 1)
), wanted AS (
    SELECT r.id FROM jobs CROSS JOIN picks CROSS JOIN LATERAL (
        SELECT e.id FROM job_executions e
        WHERE e.job_name = jobs.job_name AND e.scheduled_at >= picks.since
          AND (picks.statuses IS NULL OR e.status = ANY(picks.statuses))
        ORDER BY e.scheduled_at DESC LIMIT picks.n
    ) r
    UNION
    SELECT (SELECT e.id FROM job_executions e WHERE e.job_name = jobs.job_name
            ORDER BY e.scheduled_at LIMIT 1)
    FROM jobs
    UNION
    SELECT e.id FROM job_executions e
    WHERE e.job_name = ANY(%(jobs)s) AND e.status = 'skipped'
      AND e.error LIKE %(gap_pattern)s AND e.started_at >= %(since)s
)
SELECT e.job_name, e.scheduled_at, e.status, e.attempt, e.started_at, e.finished_at, e.error,
       w.status AS wait_status, w.deadline AS wait_deadline, w.progress AS wait_progress,
       w.decided_at - w.began_at AS waited
FROM job_executions e JOIN wanted USING (id)
LEFT JOIN dependency_waits w ON w.execution_id = e.id
ORDER BY e.job_name, e.scheduled_at

-- name: dead_outbox
-- Messages the relay gave up on.
SELECT count(*) AS dead, min(dead_at) AS oldest, max(dead_at) AS newest
FROM outbox_messages
WHERE dead_at IS NOT NULL

-- name: recorded_in_range
-- The slots of one job the ledger has a row for in [start, end]: the fire times of a
-- backfill the server dropped are those without one (schedules/backfills.py).
SELECT scheduled_at FROM job_executions
WHERE job_name = %(job)s AND scheduled_at >= %(start)s AND scheduled_at <= %(end)s;
