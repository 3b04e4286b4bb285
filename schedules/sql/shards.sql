-- The dispatch shards at sync (schedules/sync/shards.py). Table: migration 0033.

-- name: history
-- Every count recorded, oldest first: the one in force for a tick is the last whose
-- from_tick is at or before the tick's scheduled time.
SELECT from_tick, shards FROM runtime_dispatch_shards ORDER BY from_tick

-- name: record
-- A new count for every tick from `from_tick` on (a minute ahead: no tick has read it). A
-- second change before that minute replaces the first.
INSERT INTO runtime_dispatch_shards (from_tick, shards)
VALUES (%(from_tick)s, %(shards)s)
ON CONFLICT (from_tick) DO UPDATE SET shards = excluded.shards, recorded_at = now()
