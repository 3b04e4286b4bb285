-- The checks that a runtime schedule's params name its own tenant's resources
-- (activities/runtime/ownership.py). `owned_rows` is a template: {table}, {column} and {tenant}
-- are identifiers a kind declares (`TenantRow`), quoted by psycopg.sql; the values are
-- bound.

-- name: owned_rows
-- Of the (value, tenant) pairs, the ordinals of those naming a row of the table whose
-- tenant column is the tenant. Each value is read as the column's own type (through the
-- table's row type), so the lookup uses the column's index. At a slot's work the rows
-- found are locked (FOR SHARE): they stay the tenant's until the work commits.
SELECT t.n
FROM unnest(%(values)s::jsonb[], %(tenants)s::text[]) WITH ORDINALITY AS t (value, tenant, n)
JOIN {table} r
  ON r.{column} = (jsonb_populate_record(NULL::{table},
                                         jsonb_build_object(%(column)s::text, t.value))).{column}
 AND r.{tenant} = t.tenant
{lock}

-- name: schedule_tenant
SELECT tenant FROM runtime_schedules WHERE id = %(id)s
