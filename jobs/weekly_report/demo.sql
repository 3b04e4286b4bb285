-- Demo customers for `make run`, loaded once (when there are none): 1,000 customers across
-- 20 zones, each with two weeks of activity; devstack gives each a weekly-report runtime
-- schedule, Mondays 08:00 in the customer's zone (devstack/demo.py).
DO $$
DECLARE
    zones text[] := ARRAY[
        'America/New_York', 'America/Chicago', 'America/Denver', 'America/Los_Angeles',
        'America/Sao_Paulo', 'America/Santiago', 'America/Havana', 'Europe/London',
        'Europe/Paris', 'Europe/Berlin', 'Europe/Istanbul', 'Africa/Casablanca',
        'Asia/Kolkata', 'Asia/Tokyo', 'Asia/Singapore', 'Australia/Sydney',
        'Australia/Lord_Howe', 'Pacific/Auckland', 'Atlantic/Azores', 'UTC'];
BEGIN
    IF EXISTS (SELECT 1 FROM customers) THEN
        RETURN;
    END IF;

    INSERT INTO customers (tenant, name, email, timezone)
    SELECT 'customer-' || lpad(n::text, 4, '0'), 'Customer ' || n,
           'customer' || n || '@example.com', zones[1 + n % 20]
    FROM generate_series(1, 1000) AS n;

    INSERT INTO customer_activity (customer_id, occurred_at, kind, amount_cents)
    SELECT c.id,
           current_setting('demo.now')::timestamptz - (e * 97 % 336) * interval '1 hour',
           (ARRAY['login', 'login', 'order', 'refund'])[1 + (c.id + e) % 4],
           CASE WHEN (c.id + e) % 4 >= 2 THEN 500 + (c.id * 7919 + e) % 20000 ELSE 0 END
    FROM customers c, generate_series(1, 10) AS e;
END $$;
