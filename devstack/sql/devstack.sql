-- Queries of the embedded local stack (devstack/). Database names are identifiers, composed
-- with psycopg.sql.Identifier into the `{}` of the CREATE statements, never pasted in.

-- name: database_exists
SELECT 1 FROM pg_database WHERE datname = %(name)s

-- name: create_database
CREATE DATABASE {}

-- name: create_database_from_template
CREATE DATABASE {} TEMPLATE {}

-- name: overdue_invoices
SELECT count(*) FROM invoices WHERE status = 'Unpaid' AND due_date < current_date
