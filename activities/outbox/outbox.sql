-- name: recent
SELECT id, type, payload->>'invoice_number' AS subject, occurred_at,
       CASE WHEN dispatched_at IS NOT NULL THEN 'dispatched'
            WHEN dead_at IS NOT NULL THEN 'dead'
            ELSE 'pending' END AS state
FROM outbox_messages
ORDER BY occurred_at DESC, id
LIMIT %(limit)s

-- name: totals
SELECT count(*) FILTER (WHERE dispatched_at IS NULL AND dead_at IS NULL) AS pending,
       count(*) FILTER (WHERE dispatched_at IS NOT NULL) AS dispatched,
       count(*) FILTER (WHERE dead_at IS NOT NULL) AS dead
FROM outbox_messages

-- name: by_type_state
-- How many messages of each type are in each state, for `python -m schedules outbox`.
SELECT type,
       count(*) FILTER (WHERE dispatched_at IS NULL AND dead_at IS NULL) AS pending,
       count(*) FILTER (WHERE dispatched_at IS NOT NULL) AS dispatched,
       count(*) FILTER (WHERE dead_at IS NOT NULL) AS dead
FROM outbox_messages
GROUP BY type
ORDER BY type
