-- Named queries of bench/invoice_reminders.py, in the `-- name:` format of the engine's queries (activities/<part>/*.sql).

-- name: reset
TRUNCATE invoices, outbox_messages, job_executions RESTART IDENTITY CASCADE

-- name: load_invoices
-- N unpaid invoices, all past due (two to 91 days ago), never reminded.
INSERT INTO invoices (invoice_number, customer_email, status, due_date, amount_cents)
SELECT 'INV-' || lpad(n::text, 8, '0'),
       'customer' || mod(n, 50000) || '@example.com',
       'Unpaid',
       current_date - 2 - mod(n, 90)::int,
       1000 + mod(n, 100000)
FROM generate_series(1, %(count)s::bigint) AS n

-- name: set_based
-- Baseline (a): the job's marks and outbox rows in one statement over every row, with the
-- payload and idempotency key of jobs/invoice_reminders/queries.sql `remind_chunk`, no id ranges.
WITH reminded AS (
    UPDATE invoices
    SET last_reminder_at = now()
    WHERE status = 'Unpaid'
      AND due_date < %(as_of_date)s
      AND (last_reminder_at IS NULL OR last_reminder_at <= %(remind_before)s)
    RETURNING id, invoice_number, customer_email, due_date
), queued AS (
    INSERT INTO outbox_messages (type, payload, idempotency_key)
    SELECT 'InvoiceReminder',
           jsonb_build_object(
               'invoice_id', id,
               'invoice_number', invoice_number,
               'to', customer_email,
               'due_date', due_date,
               'job', %(job_name)s::text,
               'scheduled_at', %(scheduled_at)s::timestamptz
           ),
           'invoice-reminder:' || invoice_number || ':' || %(slot)s::text
    FROM reminded
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING 1
)
SELECT (SELECT count(*) FROM reminded) AS reminded, (SELECT count(*) FROM queued) AS queued

-- name: loop_lock
-- Baseline (b) follows the seed: one transaction guarded by a transaction-scoped lock.
SELECT pg_try_advisory_xact_lock(72001)

-- name: loop_select
SELECT id, invoice_number, customer_email, due_date
FROM invoices
WHERE status = 'Unpaid'
  AND due_date < %(as_of_date)s
  AND (last_reminder_at IS NULL OR last_reminder_at <= %(remind_before)s)
ORDER BY id

-- name: loop_mark
UPDATE invoices SET last_reminder_at = now() WHERE id = %(id)s

-- name: loop_queue
INSERT INTO outbox_messages (type, payload, idempotency_key)
VALUES (
    'InvoiceReminder',
    jsonb_build_object(
        'invoice_id', %(id)s::bigint,
        'invoice_number', %(invoice_number)s::text,
        'to', %(customer_email)s::text,
        'due_date', %(due_date)s::date,
        'job', %(job_name)s::text,
        'scheduled_at', %(scheduled_at)s::timestamptz
    ),
    'invoice-reminder:' || %(invoice_number)s::text || ':' || %(slot)s::text
)
ON CONFLICT (idempotency_key) DO NOTHING

-- name: effects
-- What a variant left behind: invoices marked and reminder messages queued.
SELECT (SELECT count(*) FROM invoices WHERE last_reminder_at IS NOT NULL) AS marked,
       (SELECT count(*) FROM outbox_messages WHERE type = 'InvoiceReminder') AS queued

-- name: execution
SELECT status, extract(epoch FROM finished_at - started_at) AS seconds
FROM job_executions
WHERE id = %(id)s

-- name: server_settings
SELECT name, current_setting(name)
FROM pg_settings
WHERE name IN ('fsync', 'synchronous_commit', 'full_page_writes', 'shared_buffers',
               'work_mem', 'max_wal_size', 'checkpoint_timeout')
ORDER BY name

-- name: vacuum
VACUUM ANALYZE invoices, outbox_messages, job_executions

-- name: checkpoint
CHECKPOINT

-- name: version
SELECT version()
