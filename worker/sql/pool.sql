-- Queries of the worker's connection pool (worker/run.py).

-- name: configure
-- Run on every new connection: a paused or partitioned worker must not hold row locks
-- forever; Postgres ends its session once it idles this long inside a transaction.
SELECT set_config('idle_in_transaction_session_timeout', %(idle_ms)s, false)
