-- Demo data for `make run`, loaded once (while `events` is empty).
-- weekly-cleanup: 300 outbox messages delivered 40 to 100 days ago, past the 30-day retention.
INSERT INTO outbox_messages (type, payload, idempotency_key, occurred_at, dispatched_at)
SELECT 'DemoDelivered', jsonb_build_object('demo', n), 'demo-delivered:' || n,
       now() - make_interval(days => 40 + n % 60, mins => 5),
       now() - make_interval(days => 40 + n % 60)
FROM generate_series(1, 300) AS n
WHERE NOT EXISTS (SELECT 1 FROM events);

-- hourly-sync: 5,000 events from 50 accounts over the 48 hours before the first `make run`.
INSERT INTO events (occurred_at, account_id, amount_cents)
SELECT now() - make_interval(secs => n * 34.56), 1 + n % 50, 100 + (n * 7919) % 9900
FROM generate_series(1, 5000) AS n
WHERE NOT EXISTS (SELECT 1 FROM events);
