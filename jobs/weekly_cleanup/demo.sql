-- Demo data for `make run`: 300 outbox messages delivered 40 to 100 days ago, past the
-- 30-day retention, for the first weekly-cleanup run to delete (loaded until it has run).
INSERT INTO outbox_messages (type, payload, idempotency_key, occurred_at, dispatched_at)
SELECT 'DemoDelivered', jsonb_build_object('demo', n), 'demo-delivered:' || n,
       current_setting('demo.now')::timestamptz - make_interval(days => 40 + n % 60, mins => 5),
       current_setting('demo.now')::timestamptz - make_interval(days => 40 + n % 60)
FROM generate_series(1, 300) AS n
WHERE NOT EXISTS (SELECT 1 FROM outbox_messages WHERE type = 'DemoDelivered')
  AND NOT EXISTS (SELECT 1 FROM job_executions WHERE job_name = 'weekly-cleanup');
