-- Keyset indexes for a page of runtime schedules under a filter (issue 39, the dashboard's
-- speed at 100,000 schedules): `schedules.tenants.list_schedules` pages by id, each filter
-- when given, 100 rows at a time. Without these, a tenant's page walked the primary key
-- from the first id and dropped every other tenant's row on the way (57,000 rows read for
-- the 58th tenant of a thousand each); with them a page reads its own rows only.
CREATE INDEX runtime_schedules_tenant_page
    ON runtime_schedules (tenant, id) WHERE deleted_at IS NULL;
CREATE INDEX runtime_schedules_kind_page
    ON runtime_schedules (kind, id) WHERE deleted_at IS NULL;
-- Paused schedules are few (an operator's or the engine's): an index of them alone.
CREATE INDEX runtime_schedules_paused_page
    ON runtime_schedules (id) WHERE paused AND deleted_at IS NULL;
-- (kind, id) answers every question (kind) did.
DROP INDEX runtime_schedules_kind;
