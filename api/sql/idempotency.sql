-- A create's Idempotency-Key (api/idempotency.py; table from
-- worker/migrations/0031_api_keys.sql).

-- name: find
SELECT request_sha256, schedule_id FROM api_idempotency_keys
WHERE key_id = %(key_id)s AND idempotency_key = %(idempotency_key)s

-- name: remember
-- Two requests with one key at once: the first to commit keeps its row (both created, or
-- found, the same schedule: a create is idempotent per tenant and name anyway).
INSERT INTO api_idempotency_keys (key_id, idempotency_key, request_sha256, schedule_id)
VALUES (%(key_id)s, %(idempotency_key)s, %(request_sha256)s, %(schedule_id)s)
ON CONFLICT DO NOTHING
