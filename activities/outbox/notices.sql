-- Notices that reach the owner (activities/outbox/notices.py). Tables: migrations 0002, 0032.

-- name: queue
-- One outbox message per channel of the tenant that gets the schedule's notices (a runtime
-- schedule's own tenant, or the tenant a catalog job's `notify` names), keyed by
-- (schedule, slot, event, channel): written twice, the second is dropped. No channel row:
-- nothing. The webhook's URL and secret stay in notice_channels; the relay reads them at
-- delivery.
WITH channel AS (
    SELECT c.tenant, c.webhook_url IS NOT NULL AS webhook, c.emails
    FROM notice_channels c
    WHERE c.tenant = coalesce(
        %(tenant)s::text,
        (SELECT r.tenant FROM runtime_schedules r WHERE r.id = %(runtime_id)s::bigint))
), notice AS (
    SELECT channel.*,
           jsonb_build_object('tenant', tenant, 'schedule', %(job)s::text,
                              'slot', %(slot)s::text, 'event', %(event)s::text,
                              'detail', %(detail)s::text) AS body,
           'notice:' || %(job)s::text || ':' || %(slot)s::text || ':' || %(event)s::text AS key
    FROM channel
)
INSERT INTO outbox_messages (type, payload, idempotency_key)
SELECT 'NoticeWebhook', body, key || ':webhook' FROM notice WHERE webhook
UNION ALL
SELECT 'NoticeEmail',
       body || jsonb_build_object('to', address, 'subject', %(subject)s::text,
                                  'text', %(text)s::text),
       key || ':email:' || address
FROM notice CROSS JOIN unnest(notice.emails) AS address
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING id

-- name: record_found
-- A lost or late slot the audit found, recorded once: a row back means it is new.
INSERT INTO slot_notices (job_name, scheduled_at, event, detail)
VALUES (%(job)s, %(slot)s, %(event)s, %(detail)s)
ON CONFLICT (job_name, scheduled_at, event) DO NOTHING
RETURNING job_name

-- name: channel
-- The relay's look-up at delivery: where a tenant's webhook goes and its signing secret.
SELECT webhook_url, secret FROM notice_channels WHERE tenant = %(tenant)s
