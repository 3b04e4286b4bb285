-- name: report
-- The customer's local week before the slot (7 local days: 167 or 169 hours across a DST
-- change), summed in one statement; the report row and its email (the outbox) are written
-- once per slot, in the transaction that completes the slot.
WITH c AS (
    SELECT id, name, email, timezone FROM customers WHERE id = %(customer_id)s
), w AS (
    SELECT ((%(slot)s::timestamptz AT TIME ZONE c.timezone) - interval '7 days')
               AT TIME ZONE c.timezone AS week_start,
           %(slot)s::timestamptz AS week_end
    FROM c
), s AS (
    SELECT count(*) FILTER (WHERE a.kind = 'login')::integer AS logins,
           count(*) FILTER (WHERE a.kind = 'order')::integer AS orders,
           coalesce(sum(CASE a.kind WHEN 'order' THEN a.amount_cents
                                    WHEN 'refund' THEN -a.amount_cents ELSE 0 END), 0)::bigint
               AS net_cents
    FROM w
    LEFT JOIN customer_activity a
      ON a.customer_id = %(customer_id)s
     AND a.occurred_at >= w.week_start AND a.occurred_at < w.week_end
), r AS (
    INSERT INTO weekly_reports
        (execution_id, customer_id, week_start, week_end, logins, orders, net_cents)
    SELECT %(execution_id)s, c.id, w.week_start, w.week_end, s.logins, s.orders, s.net_cents
    FROM c, w, s
    ON CONFLICT (execution_id) DO NOTHING
    RETURNING customer_id
), o AS (
    INSERT INTO outbox_messages (type, payload, idempotency_key)
    SELECT 'WeeklyReport',
           jsonb_build_object(
               'to', c.email,
               'subject', 'Your week: ' || s.orders || ' orders',
               'text', 'Hello ' || c.name || E',\n\nfrom '
                       || to_char(w.week_start AT TIME ZONE c.timezone, 'YYYY-MM-DD HH24:MI')
                       || ' to '
                       || to_char(w.week_end AT TIME ZONE c.timezone, 'YYYY-MM-DD HH24:MI')
                       || ' (' || c.timezone || E'):\n' || s.logins || ' logins, '
                       || s.orders || ' orders, net '
                       || to_char(s.net_cents / 100.0, 'FM999999990.00') || E'.\n',
               'customer_id', c.id,
               'job', %(job_name)s::text,
               'scheduled_at', %(slot)s::timestamptz
           ),
           'weekly-report:' || %(job_name)s::text || ':' || %(stamp)s::text
    FROM c, w, s, r
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING id
)
SELECT (SELECT count(*) FROM r) AS reports, (SELECT count(*) FROM o) AS emails,
       s.logins, s.orders, s.net_cents
FROM s
