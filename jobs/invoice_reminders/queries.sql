-- name: max_id
SELECT coalesce(max(id), 0) FROM invoices

-- name: remind_chunk
-- One set-based statement per id range: mark the reminder and queue its message together.
-- The UPDATE re-checks its WHERE on rows a concurrent run changed, so two runs can never
-- both remind one invoice.
WITH reminded AS (
    UPDATE invoices
    SET last_reminder_at = now()
    WHERE id > %(after_id)s AND id <= %(upto_id)s
      AND status = 'Unpaid'
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
