-- The dispatcher's session (jobs/runtime_dispatch/session.py). Tables: migrations 0020, 0033.

-- name: next_due
-- When the shard's (its `buckets`') next slot is due: the earliest next fire time of its
-- schedules (one a tenant limit deferred is looked at again from `deferred_from`), an
-- intent not started yet, or a change of the shard count (the buckets change then); and
-- whether the shard has any bucket, now or after a change recorded.
SELECT least(
    (SELECT min(CASE WHEN deferred_at IS NULL THEN next_fire_at
                     ELSE greatest(next_fire_at, %(deferred_from)s) END)
     FROM runtime_schedules
     WHERE shard = ANY(%(buckets)s::smallint[]) AND NOT paused AND deleted_at IS NULL),
    (SELECT min(coalesce(i.due_at, i.scheduled_at))
     FROM runtime_dispatch_intents i
     JOIN runtime_schedules s ON s.id = i.schedule_id
     WHERE s.shard = ANY(%(buckets)s::smallint[]) AND i.started_at IS NULL),
    (SELECT min(from_tick) FROM runtime_dispatch_shards WHERE from_tick > %(now)s)
) AS due,
-- The largest count in force now or pending: a shard at or beyond it has nothing to do.
(SELECT max(shards) FROM runtime_dispatch_shards
 WHERE from_tick > %(now)s OR from_tick = (
     SELECT max(from_tick) FROM runtime_dispatch_shards WHERE from_tick <= %(now)s)
) AS largest

-- name: clock
-- PostgreSQL's time now: a session's ticks and its end are timed by it, not by the
-- worker's clock.
SELECT clock_timestamp()
