-- The API's keys (api/keys.py; table from worker/migrations/0031_api_keys.sql).

-- name: insert
INSERT INTO api_keys (tenant, role, secret_sha256, created_by, note)
VALUES (%(tenant)s, %(role)s, %(secret_sha256)s, %(by)s, %(note)s)
RETURNING id, tenant, role, created_at, created_by, note, revoked_at

-- name: by_id
SELECT id, tenant, role, secret_sha256, revoked_at FROM api_keys WHERE id = %(id)s

-- name: list
SELECT id, tenant, role, created_at, created_by, note, revoked_at
FROM api_keys ORDER BY id

-- name: revoke
-- A revoked key stays revoked at its first revocation's time.
UPDATE api_keys SET revoked_at = coalesce(revoked_at, %(now)s) WHERE id = %(id)s
RETURNING id, tenant, role, created_at, created_by, note, revoked_at
