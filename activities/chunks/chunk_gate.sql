-- Test-only (activities/chunks/gate.py): wait until no other session holds the gate's
-- advisory lock exclusively.

-- name: pass
SELECT pg_advisory_xact_lock_shared(%(key)s)
