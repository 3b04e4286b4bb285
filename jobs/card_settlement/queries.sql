-- name: open_batch
-- The slot's batch; a slot planned again (after its first plan was lost) finds the same one.
INSERT INTO settlement_batches AS b (job_name, scheduled_at, currency)
VALUES (%(job_name)s, %(scheduled_at)s, %(currency)s)
ON CONFLICT (job_name, scheduled_at) DO UPDATE SET opened_at = b.opened_at
RETURNING id

-- name: max_captured_id
SELECT coalesce(max(id), 0) FROM card_payments WHERE status = 'captured'

-- name: settle_chunk
-- The next `chunk_size` captured payments after the cursor, settled in one statement.
-- FOR UPDATE re-checks the WHERE on rows another transaction settled meanwhile, so two
-- runs can never both settle one payment.
WITH picked AS (
    SELECT id
    FROM card_payments
    WHERE status = 'captured'
      AND id > %(after_id)s AND id <= %(upto_id)s
      AND currency = %(currency)s
      AND captured_at <= %(cutoff)s
    ORDER BY id
    LIMIT %(chunk_size)s
    FOR UPDATE
), settled AS (
    UPDATE card_payments AS p
    SET status = 'settled', settled_at = now(), settlement_batch_id = %(batch_id)s
    FROM picked
    WHERE p.id = picked.id
    RETURNING p.id, p.amount_cents
)
SELECT count(*), coalesce(sum(amount_cents), 0)::bigint, max(id) FROM settled

-- name: close_batch
-- Totals counted from the batch's payments: exact whatever chunks and attempts made them.
UPDATE settlement_batches AS b
SET payment_count = t.payments, total_cents = t.cents, closed_at = now()
FROM (
    SELECT count(*) AS payments, coalesce(sum(amount_cents), 0)::bigint AS cents
    FROM card_payments
    WHERE settlement_batch_id = %(batch_id)s
) AS t
WHERE b.id = %(batch_id)s
RETURNING b.payment_count, b.total_cents
