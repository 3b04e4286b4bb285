-- Demo data for `make run`, loaded once (while `subscriptions` is empty): 400 subscriptions
-- on three plans, started two months ago; every 40th has a card the local payment provider
-- declines (pm_decline_insufficient_funds), so a billing run shows declines too.
INSERT INTO subscriptions (customer_email, plan, amount_cents, currency, started_on, payment_method)
SELECT 'customer' || lpad((n % 300)::text, 3, '0') || '@example.com',
       (ARRAY['starter', 'team', 'business'])[1 + n % 3],
       (ARRAY[900, 2900, 9900])[1 + n % 3],
       'USD',
       (date_trunc('month', current_setting('demo.now')::timestamptz::date) - interval '2 months')::date,
       CASE WHEN n % 40 = 0 THEN 'pm_decline_insufficient_funds' ELSE 'pm_card_' || n END
FROM generate_series(1, 400) AS n
WHERE NOT EXISTS (SELECT 1 FROM subscriptions);
