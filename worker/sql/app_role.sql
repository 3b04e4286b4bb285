-- The application role (worker/app_role.py): created or updated by `python -m worker
-- migrate` when APP_DATABASE_ROLE is set, connected as the database's owner. The role may
-- read and write the application's rows and nothing else: no DDL, no other database, not
-- a superuser, cannot create roles or databases. {role}, {database} and {password} are
-- composed by psycopg.sql (an identifier and a literal: utility statements take no bound
-- parameters).

-- name: exists
SELECT 1 FROM pg_roles WHERE rolname = %(role)s

-- name: create
CREATE ROLE {role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT PASSWORD {password}

-- name: alter
ALTER ROLE {role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT PASSWORD {password}

-- name: grant
-- The least privilege the workers and the CLI need: rows of the tables and their
-- sequences in schema public, today's and (default privileges) those later migrations
-- create. Advisory locks and session settings need no grant.
GRANT CONNECT, TEMPORARY ON DATABASE {database} TO {role};
GRANT USAGE ON SCHEMA public TO {role};
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role};
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {role};
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {role};
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO {role}
