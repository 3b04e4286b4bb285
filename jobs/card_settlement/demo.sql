-- Demo payments data for `make run`, loaded once, when there are no payments and no ledger:
-- - 320 card payments settled over the last 8 days, and 150 captured in the last 25 minutes
--   that the first card-settlement runs settle;
-- - a ledger entry per payment, booked on the New York day of its settlement (or capture),
--   plus one unmatched $250.00 adjustment yesterday: nightly-reconcile alerts on that day.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM card_payments) OR EXISTS (SELECT 1 FROM ledger_entries) THEN
        RETURN;
    END IF;

    INSERT INTO card_payments (amount_cents, currency, status, captured_at, settled_at)
    SELECT 500 + (n * 7919) % 20000, 'USD', 'settled',
           current_setting('demo.now')::timestamptz - n * interval '36 minutes' - interval '1 minute',
           current_setting('demo.now')::timestamptz - n * interval '36 minutes'
    FROM generate_series(1, 320) AS n;

    INSERT INTO card_payments (amount_cents, currency, status, captured_at)
    SELECT 500 + (n * 104729) % 20000, 'USD', 'captured', current_setting('demo.now')::timestamptz - n * interval '10 seconds'
    FROM generate_series(1, 150) AS n;

    INSERT INTO ledger_entries (booked_on, amount_cents, currency, description)
    SELECT (coalesce(settled_at, captured_at) AT TIME ZONE 'America/New_York')::date,
           amount_cents, currency, 'card sale ' || id
    FROM card_payments;

    INSERT INTO ledger_entries (booked_on, amount_cents, currency, description)
    VALUES ((current_setting('demo.now')::timestamptz AT TIME ZONE 'America/New_York')::date - 1, 25000, 'USD',
            'manual adjustment, no matching payment');
END
$$;
