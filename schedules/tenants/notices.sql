-- A tenant's notice channels (schedules/tenants/notices.py). Table: migration 0032.

-- name: set_channels
-- Both channels replaced; the secret kept unless a new one is given (`rotate`).
INSERT INTO notice_channels (tenant, webhook_url, emails, secret, updated_by)
VALUES (%(tenant)s, %(webhook_url)s, %(emails)s, %(secret)s, %(by)s)
ON CONFLICT (tenant) DO UPDATE
SET webhook_url = EXCLUDED.webhook_url, emails = EXCLUDED.emails,
    secret = CASE WHEN %(rotate)s THEN EXCLUDED.secret ELSE notice_channels.secret END,
    updated_at = now(), updated_by = EXCLUDED.updated_by
RETURNING tenant, webhook_url, emails, secret, updated_at, updated_by,
          (xmax = 0 OR %(rotate)s) AS new_secret

-- name: channels
SELECT tenant, webhook_url, emails, secret, updated_at, updated_by, false AS new_secret
FROM notice_channels WHERE tenant = %(tenant)s

-- name: clear_channels
DELETE FROM notice_channels WHERE tenant = %(tenant)s RETURNING tenant
