-- Queries of the hourly-sync job (jobs/hourly_sync/activities.py). Every statement runs inside a
-- fenced transaction; the sync_windows row is the window's claim. Windows and totals are
-- the job's own: two jobs of this kind never share them (migration 0010).

-- name: insert_window
-- Claim a window nobody has claimed yet. On a conflict the caller locks and inspects it.
INSERT INTO sync_windows (job_name, window_start, window_end, scheduled_at, execution_id)
VALUES (%(job_name)s, %(window_start)s, %(window_end)s, %(scheduled_at)s, %(execution_id)s)
ON CONFLICT (job_name, window_start) DO NOTHING
RETURNING window_start

-- name: lock_window
-- The window's claim and the state of the execution holding it (NULL if cleaned up).
SELECT w.window_end, w.status, w.execution_id, e.status AS owner_status
FROM sync_windows w
LEFT JOIN job_executions e ON e.id = w.execution_id
WHERE w.job_name = %(job_name)s AND w.window_start = %(window_start)s
FOR UPDATE OF w

-- name: take_window
-- The holder failed part-way: drop its partial totals and start the window again here.
WITH cleared AS (
    DELETE FROM hourly_account_totals
    WHERE job_name = %(job_name)s AND window_start = %(window_start)s
    RETURNING 1
)
UPDATE sync_windows
SET execution_id = %(execution_id)s, scheduled_at = %(scheduled_at)s, started_at = now(),
    event_count = 0, account_count = 0
WHERE job_name = %(job_name)s AND window_start = %(window_start)s
RETURNING (SELECT count(*) FROM cleared) AS cleared

-- name: aggregate_chunk
-- The next `chunk_size` events of the window in (occurred_at, id) order after the cursor,
-- added to the per-account totals in one statement. Returns how many events it read and
-- the new cursor.
WITH batch AS (
    SELECT id, occurred_at, account_id, amount_cents
    FROM events
    WHERE occurred_at >= %(window_start)s AND occurred_at < %(window_end)s
      AND (occurred_at, id) > (%(after_at)s::timestamptz, %(after_id)s::bigint)
    ORDER BY occurred_at, id
    LIMIT %(chunk_size)s
), added AS (
    INSERT INTO hourly_account_totals AS t
        (job_name, window_start, account_id, total_cents, event_count)
    SELECT %(job_name)s, %(window_start)s, account_id, sum(amount_cents), count(*)
    FROM batch
    GROUP BY account_id
    ON CONFLICT (job_name, window_start, account_id) DO UPDATE
    SET total_cents = t.total_cents + excluded.total_cents,
        event_count = t.event_count + excluded.event_count
    RETURNING 1
), last AS (
    SELECT occurred_at, id FROM batch ORDER BY occurred_at DESC, id DESC LIMIT 1
)
SELECT (SELECT count(*) FROM batch) AS events,
       (SELECT occurred_at FROM last) AS last_at,
       (SELECT id FROM last) AS last_id,
       (SELECT count(*) FROM added) AS upserted

-- name: finish_window
UPDATE sync_windows
SET status = 'done', finished_at = now(), event_count = %(events)s,
    account_count = (SELECT count(*) FROM hourly_account_totals
                     WHERE job_name = %(job_name)s AND window_start = %(window_start)s)
WHERE job_name = %(job_name)s AND window_start = %(window_start)s
RETURNING account_count
