-- Tenants that share a fleet fairly (issue 40). Additive: the previous release reads none
-- of it and inserts without it.

-- One row per tenant with a setting of its own or a dispatch count (items 1 and 2). A NULL
-- limit takes the operator's default (worker/settings.py: RUNTIME_TENANT_MAX_IN_FLIGHT,
-- RUNTIME_TENANT_MAX_PER_MINUTE; unset: no limit). `weight`: slots a tenant gets per round
-- of the dispatcher's round-robin (activities/sql/dispatch.sql `due`).
CREATE TABLE runtime_tenant_limits (
    tenant          text        PRIMARY KEY,
    max_in_flight   integer     CHECK (max_in_flight > 0),
    max_per_minute  integer     CHECK (max_per_minute > 0),
    weight          integer     NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 1000),
    -- The dispatcher's count of slots started in `minute` (its tick's minute): the
    -- per-minute limit. The row is also the lock two dispatchers of different shards
    -- take, in their decide transactions, before they count a tenant's runs.
    minute          timestamptz,
    minute_starts   integer     NOT NULL DEFAULT 0,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    updated_by      text        NOT NULL DEFAULT ''
);

-- A schedule whose due slot a tenant limit holds back: since when, and why ("2 in flight,
-- limit 2"). Cleared when the slot is dispatched (the row's next_fire_at moves on).
ALTER TABLE runtime_schedules ADD COLUMN deferred_at timestamptz,
                              ADD COLUMN deferred_reason text;

-- A limited tenant's runs in flight: its intents not yet settled (their ledger row is not
-- yet terminal). The dispatcher settles them as their runs finish; an intent of a tenant
-- without an in-flight limit is recorded settled (nothing counts it).
ALTER TABLE runtime_dispatch_intents ADD COLUMN settled_at timestamptz;
UPDATE runtime_dispatch_intents SET settled_at = decided_at;
CREATE INDEX runtime_dispatch_intents_open
    ON runtime_dispatch_intents (schedule_id) WHERE settled_at IS NULL;
