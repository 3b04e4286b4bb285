-- Queries of the monthly-billing job (jobs/monthly_billing/activities.py). Every write runs
-- in a transaction fenced by the run's execution; each statement is safe to repeat. A run
-- works on its own job's month: its billing run and the invoices its job made.

-- name: open_run
-- Step 1. The job's billing run of the month, opened by this execution: a second one is
-- refused unless the first was reopened by a compensation (or it is this execution's own).
INSERT INTO billing_runs (job_name, month, execution_id, status)
VALUES (%(job_name)s, %(month)s, %(execution_id)s, 'open')
ON CONFLICT (job_name, month) DO UPDATE
SET execution_id = excluded.execution_id, status = 'open', opened_at = now(), closed_at = NULL
WHERE billing_runs.status = 'reopened' OR billing_runs.execution_id = excluded.execution_id
RETURNING execution_id

-- name: run_of_month
SELECT execution_id, status FROM billing_runs WHERE job_name = %(job_name)s AND month = %(month)s

-- name: reopen_run
-- Undo of step 1: the month can be billed again.
UPDATE billing_runs SET status = 'reopened', closed_at = now()
WHERE job_name = %(job_name)s AND month = %(month)s AND execution_id = %(execution_id)s
  AND status = 'open'

-- name: subscription_bounds
-- Step 2's bounds, fixed once: the subscriptions to bill are those up to the newest id now.
SELECT coalesce(max(id), 0) AS upto_id,
       count(*) FILTER (WHERE started_on <= %(month_end)s
                          AND (ended_on IS NULL OR ended_on >= %(month)s)) AS active
FROM subscriptions

-- name: generate_chunk
-- Step 2, one id range: an invoice per subscription active in the month, unique per
-- (subscription, month) whatever the job; a voided one (a compensated earlier run, of
-- this job or another) is due again, now this job's.
WITH due AS (
    SELECT id, customer_email, amount_cents
    FROM subscriptions
    WHERE id > %(after_id)s AND id <= %(upto_id)s
      AND started_on <= %(month_end)s AND (ended_on IS NULL OR ended_on >= %(month)s)
), made AS (
    INSERT INTO invoices
        (invoice_number, customer_email, status, due_date, amount_cents, subscription_id,
         billing_month, billing_job)
    SELECT 'SUB-' || to_char(%(month)s::date, 'YYYYMM') || '-' || lpad(id::text, 8, '0'),
           customer_email, 'Unpaid', %(due_date)s, amount_cents, id, %(month)s, %(job_name)s
    FROM due
    ON CONFLICT (subscription_id, billing_month) WHERE subscription_id IS NOT NULL
    DO UPDATE SET status = 'Unpaid', due_date = excluded.due_date,
                  billing_job = excluded.billing_job
    WHERE invoices.status = 'Void'
    RETURNING (xmax = 0) AS inserted
)
SELECT count(*) FILTER (WHERE inserted) AS created,
       count(*) FILTER (WHERE NOT inserted) AS revived
FROM made

-- name: charge_progress
-- Step 3's progress: the month's invoices to charge, and how many have an answer.
SELECT count(*) FILTER (WHERE i.status <> 'Void') AS total,
       count(c.invoice_id) FILTER (WHERE c.status <> 'pending') AS done
FROM invoices i LEFT JOIN charges c ON c.invoice_id = i.id
WHERE i.billing_job = %(job_name)s AND i.billing_month = %(month)s

-- name: to_charge
-- Step 3, the next batch: invoices of the month with no answer yet (never sent, or sent by
-- an attempt that died before recording the answer: sent again with the same key).
SELECT i.id, i.invoice_number, i.amount_cents, s.currency, s.payment_method
FROM invoices i
JOIN subscriptions s ON s.id = i.subscription_id
LEFT JOIN charges c ON c.invoice_id = i.id
WHERE i.billing_job = %(job_name)s AND i.billing_month = %(month)s AND i.status = 'Unpaid'
  AND (c.invoice_id IS NULL OR c.status = 'pending')
ORDER BY i.id
LIMIT %(limit)s

-- name: mark_pending
-- Just before a batch's requests are sent: each charge is pending until its answer.
-- Returns the charges sent for the first time: one pending already was sent before, by an
-- attempt that got no answer, and its outcome stays unknown until the provider says.
INSERT INTO charges (invoice_id, billing_month, status, amount_cents)
SELECT invoice_id, %(month)s, 'pending', amount_cents
FROM unnest(%(invoice_ids)s::bigint[], %(amounts)s::bigint[]) AS a (invoice_id, amount_cents)
ON CONFLICT (invoice_id) DO NOTHING
RETURNING invoice_id

-- name: record_charges
-- The provider's answers for one batch, set-based; a charged invoice is paid. An answer
-- already recorded stays as it was.
WITH answers AS (
    SELECT *
    FROM unnest(%(invoice_ids)s::bigint[], %(statuses)s::text[], %(charge_ids)s::text[],
                %(decline_codes)s::text[])
         AS a (invoice_id, status, charge_id, decline_code)
), recorded AS (
    UPDATE charges
    SET status = answers.status, provider_charge_id = answers.charge_id,
        decline_code = answers.decline_code, recorded_at = now()
    FROM answers
    WHERE charges.invoice_id = answers.invoice_id AND charges.status = 'pending'
    RETURNING charges.invoice_id, charges.status
)
UPDATE invoices SET status = 'Paid'
FROM recorded
WHERE invoices.id = recorded.invoice_id AND recorded.status = 'charged'

-- name: forget_pending
-- Charges the provider certainly did not make: their only request was refused before it was
-- processed, or the provider's lookup found no charge. No longer pending, to be sent again
-- or voided.
DELETE FROM charges WHERE invoice_id = ANY(%(invoice_ids)s) AND status = 'pending'

-- name: pending_of_month
SELECT c.invoice_id, i.invoice_number, c.amount_cents
FROM charges c JOIN invoices i ON i.id = c.invoice_id
WHERE i.billing_job = %(job_name)s AND i.billing_month = %(month)s AND c.status = 'pending'
ORDER BY c.invoice_id

-- name: void_uncharged
-- Undo of step 2: the month's invoices nobody charged are voided (charged and declined
-- ones keep their answer; pending ones were settled at the provider first). Returns the
-- voided count and the charged invoices' numbers.
WITH voided AS (
    UPDATE invoices SET status = 'Void'
    WHERE billing_job = %(job_name)s AND billing_month = %(month)s AND status = 'Unpaid'
      AND NOT EXISTS (SELECT 1 FROM charges c WHERE c.invoice_id = invoices.id)
    RETURNING id
)
SELECT (SELECT count(*) FROM voided) AS voided,
       coalesce((SELECT array_agg(i.invoice_number ORDER BY i.id)
                 FROM charges c JOIN invoices i ON i.id = c.invoice_id
                 WHERE i.billing_job = %(job_name)s AND i.billing_month = %(month)s
                   AND c.status = 'charged'), '{}') AS charged

-- name: queue_receipts
-- Step 4: one receipt per charged invoice of the month, in the outbox, once each.
WITH queued AS (
    INSERT INTO outbox_messages (type, payload, idempotency_key)
    SELECT 'PaymentReceipt',
           jsonb_build_object(
               'invoice_id', i.id,
               'invoice_number', i.invoice_number,
               'to', i.customer_email,
               'amount_cents', c.amount_cents,
               'billing_month', c.billing_month,
               'charge_id', c.provider_charge_id,
               'job', %(job_name)s::text,
               -- The relay mails an email type's own subject and text.
               'subject', 'Receipt for invoice ' || i.invoice_number,
               'text', 'Hello,' || chr(10) || chr(10) || 'we received your payment of '
                       || to_char(c.amount_cents / 100.0, 'FM999999990.00') || ' '
                       || upper(s.currency) || ' for ' || to_char(c.billing_month, 'FMMonth YYYY')
                       || ' (invoice ' || i.invoice_number || ').' || chr(10) || chr(10)
                       || 'Thank you,' || chr(10) || 'Billing' || chr(10)
           ),
           'payment-receipt:' || i.invoice_number
    FROM charges c
    JOIN invoices i ON i.id = c.invoice_id
    JOIN subscriptions s ON s.id = i.subscription_id
    WHERE i.billing_job = %(job_name)s AND i.billing_month = %(month)s AND c.status = 'charged'
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING 1
)
SELECT count(*) FROM queued

-- name: close_run
UPDATE billing_runs SET status = 'closed', closed_at = now()
WHERE job_name = %(job_name)s AND month = %(month)s AND execution_id = %(execution_id)s
  AND status = 'open'

-- name: month_totals
-- What the month's billing came to, for the run's result.
SELECT count(*) FILTER (WHERE c.status = 'charged') AS charged,
       count(*) FILTER (WHERE c.status = 'declined') AS declined,
       coalesce(sum(c.amount_cents) FILTER (WHERE c.status = 'charged'), 0) AS charged_cents
FROM charges c JOIN invoices i ON i.id = c.invoice_id
WHERE i.billing_job = %(job_name)s AND i.billing_month = %(month)s AND c.status <> 'pending'

-- name: audit_effects
-- For `python -m schedules audit` (its per-kind domain-effects hook): charges the provider
-- made on invoices that ended Void (an undo voided what the customer paid for), and
-- charges whose outcome is still unknown on a Void invoice (to look up at the provider), for
-- the billing runs of the executions whose slot is in [from, to).
SELECT CASE c.status WHEN 'charged' THEN 'orphan_effect' ELSE 'inconclusive' END AS kind,
       r.execution_id,
       CASE c.status
           WHEN 'charged' THEN 'the provider charged invoice ' || i.invoice_number
                               || ', which ended Void'
           ELSE 'charge of invoice ' || i.invoice_number
                || ' is still pending at the provider, and the invoice ended Void'
       END AS detail,
       jsonb_build_object('invoice_id', i.id, 'invoice_number', i.invoice_number,
                          'billing_month', i.billing_month, 'charge_status', c.status,
                          'provider_charge_id', c.provider_charge_id) AS witnesses
FROM invoices i
JOIN charges c ON c.invoice_id = i.id
JOIN billing_runs r ON r.job_name = i.billing_job AND r.month = i.billing_month
JOIN job_executions e ON e.id = r.execution_id
WHERE i.status = 'Void' AND c.status IN ('charged', 'pending')
  AND e.job_name = ANY(%(jobs)s) AND e.scheduled_at >= %(from)s AND e.scheduled_at < %(to)s
ORDER BY r.execution_id, i.id
