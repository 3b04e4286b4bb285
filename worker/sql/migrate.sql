-- Queries of the migration runner (worker/migrate.py). The migrations themselves are the
-- numbered files in worker/migrations/.

-- name: lock
SELECT pg_advisory_lock(%(key)s)

-- name: unlock
SELECT pg_advisory_unlock(%(key)s)

-- name: table_exists
-- Checked first: the application role (worker/app_role.py) may not create tables, so a
-- worker connected as it migrates at start only when nothing is missing.
SELECT to_regclass('schema_migrations') IS NOT NULL

-- name: create_table
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)

-- name: applied
SELECT version, checksum FROM schema_migrations

-- name: record
INSERT INTO schema_migrations (version, name, checksum)
VALUES (%(version)s, %(name)s, %(checksum)s)

-- name: family_applied
-- The job families' own migrations (worker/migrations/0028_family_migrations.sql).
SELECT family, version, checksum FROM family_migrations

-- name: family_record
INSERT INTO family_migrations (family, version, name, checksum)
VALUES (%(family)s, %(version)s, %(name)s, %(checksum)s)
