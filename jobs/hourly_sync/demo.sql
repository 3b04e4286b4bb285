-- Demo data for `make run`, loaded once (while `events` is empty): 5,000 events from 50
-- accounts over the 48 hours before the first `make run`, for hourly-sync to aggregate.
INSERT INTO events (occurred_at, account_id, amount_cents)
SELECT current_setting('demo.now')::timestamptz - make_interval(secs => n * 34.56), 1 + n % 50, 100 + (n * 7919) % 9900
FROM generate_series(1, 5000) AS n
WHERE NOT EXISTS (SELECT 1 FROM events);
