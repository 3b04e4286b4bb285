-- Queries of the outbox relay (jobs/outbox_relay/activities.py). Each runs in its own short
-- transaction; no lock is held while a message is on the wire.

-- name: claim
-- Take up to `limit` due messages and lease them: `next_attempt_at` moves `lease` seconds
-- ahead, so no other relay picks them until this one records an outcome or dies and the
-- lease runs out. SKIP LOCKED lets any number of relays claim side by side; a row another
-- relay leased since this statement's snapshot fails the re-checked WHERE and is left out.
-- `only_types` NULL: every type; otherwise only those (no webhook configured).
WITH picked AS (
    SELECT id FROM outbox_messages
    WHERE dispatched_at IS NULL AND dead_at IS NULL AND next_attempt_at <= now()
      AND (%(only_types)s::text[] IS NULL OR type = ANY(%(only_types)s::text[]))
    ORDER BY next_attempt_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE outbox_messages m
SET next_attempt_at = now() + make_interval(secs => %(lease_seconds)s),
    claim_token = %(token)s, claimed_by = %(holder)s, claimed_at = now()
FROM picked
WHERE m.id = picked.id
RETURNING m.id, m.type, m.payload, m.attempts, m.occurred_at

-- name: mark_dispatched
-- Delivered: final whoever's claim it is now (a message delivered twice after a lease ran
-- out is still delivered). A message already marked stays as it was.
UPDATE outbox_messages
SET dispatched_at = now(), attempts = attempts + 1, last_error = NULL, dead_at = NULL,
    claim_token = NULL
WHERE id = ANY(%(ids)s::uuid[]) AND dispatched_at IS NULL

-- name: mark_failed
-- One statement for a batch's failures, under this batch's claim only: a message another
-- relay claimed after this one's lease ran out keeps its new lease. Permanent failures and
-- the last allowed attempt become dead; the rest come due again after an exponential
-- backoff (base * 2^(attempts so far), capped, with up to 20 percent jitter either way so retries spread out).
UPDATE outbox_messages m
SET attempts = m.attempts + 1,
    last_error = f.error,
    claim_token = NULL,
    dead_at = CASE WHEN f.permanent OR m.attempts + 1 >= %(max_attempts)s THEN now() END,
    next_attempt_at = now() + make_interval(secs => least(
        %(backoff_base)s * power(2, least(m.attempts, 30)), %(backoff_max)s
    ) * (0.8 + 0.4 * random()))
FROM unnest(%(ids)s::uuid[], %(errors)s::text[], %(permanent)s::boolean[])
    AS f(id, error, permanent)
WHERE m.id = f.id AND m.claim_token = %(token)s AND m.dispatched_at IS NULL
RETURNING m.id, m.dead_at IS NOT NULL AS dead

-- name: release
-- Claimed but never attempted (the relay was stopped mid-batch): due again at once, no
-- attempt counted.
UPDATE outbox_messages
SET next_attempt_at = now(), claim_token = NULL
WHERE id = ANY(%(ids)s::uuid[]) AND claim_token = %(token)s AND dispatched_at IS NULL

-- name: waiting
-- Messages due that this relay cannot deliver (their transport is not configured).
SELECT type, count(*) AS n FROM outbox_messages
WHERE dispatched_at IS NULL AND dead_at IS NULL AND next_attempt_at <= now()
  AND NOT (type = ANY(%(types)s::text[]))
GROUP BY type ORDER BY type

-- name: seconds_until_due
-- How long until the next message this relay may claim is due, by the database's clock
-- (negative: one is due now; NULL: none waits). The relay's session sleeps that long at
-- most (jobs/outbox_relay/activities.py).
SELECT extract(epoch FROM min(next_attempt_at) - now())::float8 FROM outbox_messages
WHERE dispatched_at IS NULL AND dead_at IS NULL
  AND (%(only_types)s::text[] IS NULL OR type = ANY(%(only_types)s::text[]))
