-- Demo billing data for `make run`: 300 customers and 1,200 invoices, about a third of
-- them unpaid and past due. Loaded once, into an empty invoices table.
INSERT INTO invoices (invoice_number, customer_email, status, due_date, amount_cents)
SELECT 'INV-' || lpad(n::text, 6, '0'),
       'customer' || lpad((n % 300)::text, 3, '0') || '@example.com',
       CASE WHEN n % 3 = 0 THEN 'Paid' ELSE 'Unpaid' END,
       current_setting('demo.now')::timestamptz::date - ((n % 60) - 20),
       1000 + (n * 7919) % 90000
FROM generate_series(1, 1200) AS n
WHERE NOT EXISTS (SELECT 1 FROM invoices);
