-- name: reconcile_day
-- One day's totals, stored and, over the threshold, alerted, in one statement. A re-run
-- with the same totals changes nothing: the upsert skips equal rows and the alert's
-- idempotency key is per (currency, day).
WITH totals AS (
    SELECT
        (SELECT coalesce(sum(amount_cents), 0)::bigint
         FROM ledger_entries
         WHERE booked_on = %(day)s AND currency = %(currency)s) AS ledger_total,
        (SELECT coalesce(sum(amount_cents), 0)::bigint
         FROM card_payments
         WHERE status = 'settled' AND currency = %(currency)s
           AND settled_at >= %(day_start)s AND settled_at < %(day_end)s) AS payments_total
), stored AS (
    INSERT INTO reconciliations AS r
        (day, currency, ledger_total, payments_total, discrepancy, job_name, scheduled_at)
    SELECT %(day)s, %(currency)s, ledger_total, payments_total,
           ledger_total - payments_total, %(job_name)s, %(scheduled_at)s
    FROM totals
    ON CONFLICT (day, currency) DO UPDATE
    SET ledger_total = excluded.ledger_total,
        payments_total = excluded.payments_total,
        discrepancy = excluded.discrepancy,
        checked_at = now(),
        job_name = excluded.job_name,
        scheduled_at = excluded.scheduled_at
    WHERE (r.ledger_total, r.payments_total)
          IS DISTINCT FROM (excluded.ledger_total, excluded.payments_total)
    RETURNING 1
), alerted AS (
    INSERT INTO outbox_messages (type, payload, idempotency_key)
    SELECT 'ReconciliationAlert',
           jsonb_build_object(
               'day', %(day)s::date,
               'currency', %(currency)s::text,
               'ledger_total', ledger_total,
               'payments_total', payments_total,
               'discrepancy', ledger_total - payments_total,
               'threshold', %(threshold_cents)s::bigint
           ),
           'reconciliation-alert:' || %(currency)s::text || ':' || %(day)s::date::text
    FROM totals
    WHERE abs(ledger_total - payments_total) > %(threshold_cents)s
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING 1
)
SELECT ledger_total, payments_total,
       (SELECT count(*) FROM stored) AS stored,
       (SELECT count(*) FROM alerted) AS alerted
FROM totals
