-- Rows bench/audit_scale.py seeds: a recorded history of N slots for `schedules audit`.

-- name: seed_history
-- One completed run per minute from %(first)s, N of them, each with its evidence as the
-- engine writes it: a take-over and a completing chunk in the commit journal, and one
-- outbox message named by its execution and attempt (delivered).
WITH runs AS (
    INSERT INTO job_executions
        (job_name, scheduled_at, status, origin, attempt, workflow_id, run_id,
         started_at, finished_at)
    SELECT %(job)s, t, 'completed', 'scheduled', 1,
           %(job)s || '-' || to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
           md5(t::text), t + interval '1 second', t + interval '2 seconds'
    FROM generate_series(%(first)s::timestamptz,
                         %(first)s::timestamptz + (%(n)s - 1) * interval '1 minute',
                         interval '1 minute') AS t
    RETURNING id, scheduled_at
), journal AS (
    INSERT INTO commit_journal (execution_id, attempt, what, status, txid)
    SELECT id, 1, w.what, w.status, id FROM runs,
           (VALUES ('take_over', 'running'), ('chunk', 'completed')) AS w (what, status)
)
INSERT INTO outbox_messages
    (type, payload, idempotency_key, execution_id, attempt, txid, occurred_at, dispatched_at)
SELECT 'SettlementBatch', jsonb_build_object('slot', scheduled_at), 'bench:' || id, id, 1,
       id, scheduled_at, scheduled_at + interval '3 seconds'
FROM runs

-- name: seed_anomalies
-- Three lost slots (rows deleted) and two unexpected ones (a row at second 30).
WITH lost AS (
    DELETE FROM job_executions
    WHERE job_name = %(job)s AND scheduled_at = ANY(%(lost)s::timestamptz[])
)
INSERT INTO job_executions (job_name, scheduled_at, status, origin, started_at, finished_at)
SELECT %(job)s, t, 'completed', 'scheduled', t, t + interval '1 second'
FROM unnest(%(unexpected)s::timestamptz[]) AS t
