-- Dispatch shards as a live setting (issue 40, item 5).
--
-- A runtime schedule's `shard` column becomes its bucket: id % 16, fixed at insert (it was
-- id % 4). The dispatcher of shard i, when N shards are in force, takes the buckets b with
-- b % N = i (N divides 16: 1, 2, 4, 8 or 16), so under 4 shards every row keeps the
-- dispatcher it had: id % 16 % 4 = id % 4.
UPDATE runtime_schedules SET shard = id % 16 WHERE shard <> id % 16;

-- The number of dispatch shards in force, by tick: the row with the latest `from_tick` at
-- or before a tick's scheduled time. Every dispatcher ticking the same minute reads the
-- same count, whenever its run starts, so the buckets of a minute are split once: none
-- taken by two shards' rules, none left out. `schedules sync` appends a row when
-- RUNTIME_DISPATCH_SHARDS changes, from a minute at least one minute ahead, after the
-- dispatchers that count needs exist (schedules/sync/shards.py).
CREATE TABLE runtime_dispatch_shards (
    from_tick   timestamptz PRIMARY KEY,
    shards      smallint    NOT NULL CHECK (shards IN (1, 2, 4, 8, 16)),
    recorded_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO runtime_dispatch_shards (from_tick, shards) VALUES ('1970-01-01T00:00:00Z', 4);
